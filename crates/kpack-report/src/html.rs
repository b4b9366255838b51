//! The report page: one self-contained HTML file (no network, no external script, font or
//! stylesheet). A static SVG treemap (files, then their parts, largest first, one colour per
//! target) with a legend, hover details (`<title>` plus a small inline script), and tables
//! with every number of the JSON form.

use std::fmt::Write;

use crate::treemap::{self, Rect};
use crate::usage::{FileUsage, Part, PartKind, Usage};

/// Size of the SVG (the screenshot window of the test and the docs).
pub const PAGE: Rect = Rect {
    x: 0.0,
    y: 0.0,
    w: 1280.0,
    h: 900.0,
};

/// Where the treemap is drawn inside the SVG.
pub const TREEMAP: Rect = Rect {
    x: 16.0,
    y: 64.0,
    w: 900.0,
    h: 820.0,
};

const LEGEND_X: f64 = 936.0;
const FONT_PX: f64 = 12.0;
/// Average advance of the sans-serif font at 12 px, generous so labels never overflow.
const CHAR_PX: f64 = 7.0;
const FILE_HEADER_PX: f64 = 18.0;

/// Fill of bytes that belong to no target.
const HOST_GREY: &str = "#8c8c8c";
const INDEX_GREY: &str = "#b4b4b4";
const OTHER_GREY: &str = "#d6d6d6";

/// The page for `usage`; `inputs` names what was measured (the paths as given).
pub fn render(usage: &Usage, inputs: &str) -> String {
    let title = format!("kpack report: {inputs}");
    let mut svg = String::new();
    let total = usage.disk_bytes;
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Verdana, Arial, sans-serif" font-size="{FONT_PX}">
<defs>
<pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="8" fill="#ffffff" fill-opacity="0.35"/></pattern>
<pattern id="dots" width="8" height="8" patternUnits="userSpaceOnUse"><circle cx="4" cy="4" r="1.6" fill="#000000" fill-opacity="0.3"/></pattern>
</defs>
<rect width="{w}" height="{h}" fill="#ffffff"/>
<text x="16" y="28" font-size="20" font-weight="bold">{t}</text>
<text x="16" y="50" fill="#444444">{size} in {n} file{s} · {targets} GPU target{ts} · largest first, colour = target, grey = host code</text>
"##,
        w = PAGE.w,
        h = PAGE.h,
        t = esc(&format!(
            "kpack report: {}",
            keep_tail(inputs, PAGE.w - 200.0, 12.0)
        )),
        size = human(total),
        n = usage.files.len(),
        s = if usage.files.len() == 1 { "" } else { "s" },
        targets = usage.targets.len(),
        ts = if usage.targets.len() == 1 { "" } else { "s" },
    );
    draw_treemap(&mut svg, usage);
    draw_legend(&mut svg, usage);
    svg.push_str("</svg>\n");

    let mut page = String::new();
    let _ = write!(
        page,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{t}</title>
<style>
body{{margin:0;font-family:"DejaVu Sans",Verdana,Arial,sans-serif;font-size:13px;color:#222}}
#map svg{{display:block;width:100%;max-width:{w}px;height:auto}}
#info{{position:absolute;display:none;background:#fffff0;border:1px solid #888;padding:4px 8px;white-space:pre;pointer-events:none;font-size:12px}}
table{{border-collapse:collapse;margin:16px}}td,th{{padding:2px 10px;border-bottom:1px solid #ddd;text-align:right}}td:first-child,th:first-child{{text-align:left}}
h2{{margin:24px 16px 0;font-size:16px}}
</style></head><body>
<div id="map">{svg}</div>
<div id="info"></div>
"#,
        t = esc(&title),
        w = PAGE.w,
    );
    write_tables(&mut page, usage);
    page.push_str(
        r#"<script>
const info = document.getElementById("info");
for (const g of document.querySelectorAll("g.part")) {
  g.addEventListener("mousemove", (e) => {
    info.textContent = g.querySelector("title").textContent;
    info.style.display = "block";
    info.style.left = (e.pageX + 14) + "px";
    info.style.top = (e.pageY + 14) + "px";
  });
  g.addEventListener("mouseleave", () => { info.style.display = "none"; });
}
</script>
</body></html>
"#,
    );
    page
}

fn draw_treemap(svg: &mut String, usage: &Usage) {
    let mut files: Vec<&FileUsage> = usage.files.iter().filter(|f| f.disk_bytes > 0).collect();
    files.sort_by(|a, b| b.disk_bytes.cmp(&a.disk_bytes).then(a.path.cmp(&b.path)));
    let weights: Vec<u64> = files.iter().map(|f| f.disk_bytes).collect();
    let single = files.len() == 1;
    for (file, rect) in files.iter().zip(treemap::squarify(&weights, TREEMAP)) {
        let rect = rect.inset(1.0);
        let header = single || (rect.w >= 60.0 && rect.h >= 3.0 * FILE_HEADER_PX);
        let inner = if header {
            let _ = writeln!(
                svg,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#3a3a3a"/>"##,
                rect.x, rect.y, rect.w, rect.h
            );
            let name = file.path.rsplit('/').next().unwrap_or(&file.path);
            let label = format!(
                "{name} · {} · {}",
                human(file.disk_bytes),
                percent(file.disk_bytes, usage.disk_bytes)
            );
            if let Some(text) = fit(&label, rect.w - 8.0).or_else(|| fit(name, rect.w - 8.0)) {
                let _ = writeln!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" fill="#ffffff" font-weight="bold"><title>{}</title>{}</text>"##,
                    rect.x + 4.0,
                    rect.y + 13.0,
                    esc(&file.path),
                    esc(&text)
                );
            }
            Rect {
                x: rect.x + 1.0,
                y: rect.y + FILE_HEADER_PX,
                w: (rect.w - 2.0).max(0.0),
                h: (rect.h - FILE_HEADER_PX - 1.0).max(0.0),
            }
        } else {
            rect
        };
        let weights: Vec<u64> = file.parts.iter().map(|p| p.disk_bytes).collect();
        for (part, r) in file.parts.iter().zip(treemap::squarify(&weights, inner)) {
            draw_part(svg, usage, file, part, r);
        }
    }
}

fn draw_part(svg: &mut String, usage: &Usage, file: &FileUsage, part: &Part, r: Rect) {
    if r.w <= 0.0 || r.h <= 0.0 {
        return;
    }
    let fill = part_colour(part);
    let _ = write!(
        svg,
        r##"<g class="part"><title>{}</title><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="#ffffff" stroke-width="1"/>"##,
        esc(&details(usage, file, part)),
        r.x,
        r.y,
        r.w,
        r.h
    );
    let overlay = match part.kind {
        PartKind::Database => Some("hatch"),
        PartKind::KpackArchive if part.target.is_some() => Some("dots"),
        _ => None,
    };
    if let Some(pattern) = overlay {
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="url(#{pattern})"/>"#,
            r.x, r.y, r.w, r.h
        );
    }
    let ink = if dark(&fill) { "#ffffff" } else { "#111111" };
    let name = part_name(part);
    let size = human(part.disk_bytes);
    let figures = format!("{size} · {}", percent(part.disk_bytes, usage.disk_bytes));
    let room = r.w - 8.0;
    let mut lines: Vec<String> = Vec::new();
    if r.h >= 2.0 * FONT_PX + 12.0 {
        let second = [figures, size]
            .into_iter()
            .find(|f| f.chars().count() as f64 * CHAR_PX <= room);
        if let (Some(a), Some(b)) = (fit(&name, room), second) {
            lines = vec![a, b];
        }
    }
    if lines.is_empty() && r.h >= FONT_PX + 6.0 {
        lines.extend(fit(&name, room));
    }
    for (i, line) in lines.iter().enumerate() {
        let weight = if i == 0 { r#" font-weight="bold""# } else { "" };
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" fill="{ink}"{weight}>{}</text>"#,
            r.x + 4.0,
            r.y + 4.0 + FONT_PX + i as f64 * (FONT_PX + 3.0),
            esc(line)
        );
    }
    svg.push_str("</g>\n");
}

fn draw_legend(svg: &mut String, usage: &Usage) {
    let mut y = TREEMAP.y + 4.0;
    let _ = writeln!(
        svg,
        r#"<text x="{LEGEND_X}" y="{y}" font-weight="bold">Target</text><text x="{}" y="{y}" font-weight="bold" text-anchor="end">on disk</text><text x="{}" y="{y}" font-weight="bold" text-anchor="end">share</text>"#,
        PAGE.w - 76.0,
        PAGE.w - 16.0
    );
    y += 8.0;
    let mut targets: Vec<_> = usage.targets.iter().collect();
    targets.sort_by(|a, b| {
        b.disk_bytes
            .cmp(&a.disk_bytes)
            .then(a.target.cmp(&b.target))
    });
    let mut rows: Vec<(String, String, u64, String)> = targets
        .iter()
        .map(|t| {
            let objects = if t.count > 0 {
                format!("{} code objects, {} uncompressed", t.count, human(t.bytes))
            } else {
                "database files only".to_owned()
            };
            (
                target_colour(&t.target),
                t.target.clone(),
                t.disk_bytes,
                objects,
            )
        })
        .collect();
    for k in &usage.kinds {
        let (fill, name) = match k.kind {
            PartKind::Host => (HOST_GREY, "host code"),
            PartKind::Other => (OTHER_GREY, "other files"),
            _ => continue,
        };
        rows.push((
            fill.to_owned(),
            name.to_owned(),
            k.disk_bytes,
            String::new(),
        ));
    }
    let index: u64 = usage
        .files
        .iter()
        .flat_map(|f| &f.parts)
        .filter(|p| p.kind == PartKind::KpackArchive && p.target.is_none())
        .map(|p| p.disk_bytes)
        .sum();
    if index > 0 {
        rows.push((
            INDEX_GREY.to_owned(),
            "archive index".to_owned(),
            index,
            String::new(),
        ));
    }
    let row_h = if rows.len() > 30 { 17.0 } else { 24.0 };
    for (fill, name, bytes, hover) in rows {
        if y + row_h > PAGE.h - 60.0 {
            let _ = writeln!(
                svg,
                r##"<text x="{LEGEND_X}" y="{:.1}" fill="#555555">… more in the tables below</text>"##,
                y + 14.0
            );
            y += row_h;
            break;
        }
        let _ = writeln!(
            svg,
            r##"<g><title>{}</title><rect x="{LEGEND_X}" y="{:.1}" width="16" height="16" fill="{fill}" stroke="#555555" stroke-width="0.5"/><text x="{:.1}" y="{:.1}">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text></g>"##,
            esc(&format!(
                "{name}: {} bytes on disk. {hover}",
                grouped(bytes)
            )),
            y + 4.0,
            LEGEND_X + 24.0,
            y + 17.0,
            esc(&name),
            PAGE.w - 76.0,
            y + 17.0,
            human(bytes),
            PAGE.w - 16.0,
            y + 17.0,
            percent(bytes, usage.disk_bytes)
        );
        y += row_h;
    }
    let has = |kind| usage.kinds.iter().any(|k| k.kind == kind);
    for (present, pattern, text) in [
        (
            has(PartKind::Database),
            "hatch",
            "hatched: kernel-database files",
        ),
        (
            has(PartKind::KpackArchive),
            "dots",
            "dotted: already-split .kpack archives",
        ),
    ] {
        if present {
            y += 6.0;
            let _ = writeln!(
                svg,
                r##"<rect x="{LEGEND_X}" y="{:.1}" width="16" height="16" fill="#777777"/><rect x="{LEGEND_X}" y="{:.1}" width="16" height="16" fill="url(#{pattern})"/><text x="{:.1}" y="{:.1}">{text}</text>"##,
                y + 4.0,
                y + 4.0,
                LEGEND_X + 24.0,
                y + 17.0
            );
            y += row_h;
        }
    }
}

fn write_tables(page: &mut String, usage: &Usage) {
    let total = usage.disk_bytes;
    page.push_str("<h2>Per target</h2>\n<table><tr><th>target</th><th>bytes on disk</th><th>share</th><th>code objects</th><th>uncompressed bytes</th></tr>\n");
    for t in &usage.targets {
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&t.target),
            grouped(t.disk_bytes),
            percent(t.disk_bytes, total),
            t.count,
            grouped(t.bytes)
        );
    }
    page.push_str("</table>\n<h2>Per kind</h2>\n<table><tr><th>kind</th><th>bytes on disk</th><th>share</th></tr>\n");
    for k in &usage.kinds {
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            k.kind.name(),
            grouped(k.disk_bytes),
            percent(k.disk_bytes, total)
        );
    }
    page.push_str("</table>\n<h2>Per file</h2>\n<table><tr><th>file</th><th>kind</th><th>target</th><th>bytes on disk</th><th>share</th><th>code objects</th><th>uncompressed bytes</th></tr>\n");
    for f in &usage.files {
        for p in &f.parts {
            let _ = writeln!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.path),
                p.kind.name(),
                esc(p.target.as_deref().unwrap_or("")),
                grouped(p.disk_bytes),
                percent(p.disk_bytes, total),
                p.count,
                grouped(p.bytes)
            );
        }
    }
    let _ = writeln!(
        page,
        "<tr><th>total</th><th></th><th></th><th>{}</th><th>100%</th><th></th><th></th></tr></table>",
        grouped(total)
    );
}

/// The hover text of a part.
fn details(usage: &Usage, file: &FileUsage, part: &Part) -> String {
    let mut s = format!(
        "{}\n{}{}\n{} bytes on disk ({} of all, {} of the file)",
        file.path,
        part.kind.name(),
        part.target
            .as_deref()
            .map(|t| format!(" · {t}"))
            .unwrap_or_default(),
        grouped(part.disk_bytes),
        percent(part.disk_bytes, usage.disk_bytes),
        percent(part.disk_bytes, file.disk_bytes)
    );
    if part.count > 0 {
        let _ = write!(
            s,
            "\n{} code objects, {} bytes uncompressed",
            part.count,
            grouped(part.bytes)
        );
    }
    if let Some(handler) = file.handler {
        let _ = write!(s, "\nkernel database ({handler} handler)");
    }
    s
}

fn part_name(part: &Part) -> String {
    match (&part.target, part.kind) {
        (Some(t), _) => t.clone(),
        (None, PartKind::Host) => "host code".to_owned(),
        (None, PartKind::KpackArchive) => "archive index".to_owned(),
        (None, _) => "other".to_owned(),
    }
}

fn part_colour(part: &Part) -> String {
    match (&part.target, part.kind) {
        (Some(t), _) => target_colour(t),
        (None, PartKind::Host) => HOST_GREY.to_owned(),
        (None, PartKind::KpackArchive) => INDEX_GREY.to_owned(),
        (None, _) => OTHER_GREY.to_owned(),
    }
}

/// Hand-picked colours (hue, saturation, lightness) for the processors ROCm ships most,
/// chosen so that any of them side by side are told apart; the first entries are the
/// targets most often shipped together.
const PALETTE: [(&str, f64, f64, f64); 24] = [
    ("gfx90a", 212.0, 0.62, 0.50),
    ("gfx942", 355.0, 0.68, 0.55),
    ("gfx1100", 130.0, 0.50, 0.45),
    ("gfx908", 265.0, 0.55, 0.58),
    ("gfx1030", 38.0, 0.70, 0.50),
    ("gfx906", 178.0, 0.55, 0.48),
    ("gfx900", 310.0, 0.55, 0.55),
    ("gfx803", 85.0, 0.55, 0.45),
    ("gfx950", 20.0, 0.55, 0.38),
    ("gfx1101", 330.0, 0.70, 0.75),
    ("gfx1201", 232.0, 0.50, 0.35),
    ("gfx1200", 52.0, 0.80, 0.60),
    ("gfx1102", 65.0, 0.45, 0.32),
    ("gfx1151", 195.0, 0.70, 0.72),
    ("gfx1010", 10.0, 0.75, 0.70),
    ("gfx1012", 168.0, 0.60, 0.28),
    ("gfx940", 285.0, 0.35, 0.38),
    ("gfx941", 150.0, 0.45, 0.72),
    ("gfx1150", 28.0, 0.85, 0.62),
    ("gfx9-4-generic", 345.0, 0.30, 0.40),
    ("gfx10-3-generic", 45.0, 0.30, 0.40),
    ("gfx11-generic", 120.0, 0.25, 0.30),
    ("gfx12-generic", 240.0, 0.25, 0.55),
    ("gfx9-generic", 200.0, 0.30, 0.40),
];

/// A target's colour, the same in every report: processors of [`PALETTE`] have theirs, any
/// other name (a rarer processor, a family such as `gfx11xx`) a hue from its hash; features
/// shade it (`xnack+` darker, `xnack-` lighter) so variants of one processor look related.
pub fn target_colour(target: &str) -> String {
    let processor = target.split(':').next().unwrap_or(target);
    let (hue, saturation, mut light) = PALETTE
        .iter()
        .find(|(p, ..)| *p == processor)
        .map(|&(_, h, s, l)| (h, s, l))
        .unwrap_or(((fnv1a(processor) % 360) as f64, 0.55, 0.55));
    if target.contains("xnack+") {
        light -= 0.10;
    }
    if target.contains("xnack-") {
        light += 0.10;
    }
    if target.contains("sramecc-") {
        light += 0.05;
    }
    hsl_hex(hue, saturation, light.clamp(0.15, 0.85))
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn hsl_hex(h: f64, s: f64, l: f64) -> String {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// Perceived darkness of a `#rrggbb` colour, to pick white or black text on it.
fn dark(hex: &str) -> bool {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap_or(0);
    let (r, g, b) = (
        f64::from(v >> 16 & 0xff),
        f64::from(v >> 8 & 0xff),
        f64::from(v & 0xff),
    );
    0.299 * r + 0.587 * g + 0.114 * b < 140.0
}

/// `text` when it fits in `width` pixels, else shortened with an ellipsis when at least
/// four characters remain, else nothing.
fn fit(text: &str, width: f64) -> Option<String> {
    let max = (width / CHAR_PX).floor() as usize;
    let len = text.chars().count();
    if len <= max {
        Some(text.to_owned())
    } else if max >= 5 {
        Some(text.chars().take(max - 1).chain(['…']).collect())
    } else {
        None
    }
}

/// `text`, or its end after an ellipsis when it is wider than `width` pixels at `char_px`
/// per character (a path's end says most).
fn keep_tail(text: &str, width: f64, char_px: f64) -> String {
    let max = ((width / char_px).floor() as usize).max(2);
    let len = text.chars().count();
    if len <= max {
        return text.to_owned();
    }
    ['…']
        .into_iter()
        .chain(text.chars().skip(len - max + 1))
        .collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `1.3 GiB`, `212.4 MiB`, `15.2 KiB`, `812 B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0%".to_owned();
    }
    let p = part as f64 * 100.0 / whole as f64;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// Thousands separators: `1,234,567` (the CLI's human output uses the same).
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_that_do_not_fit_are_shortened_or_dropped() {
        assert_eq!(fit("gfx90a", 100.0).as_deref(), Some("gfx90a"));
        assert_eq!(fit("gfx90a:xnack+", 50.0).as_deref(), Some("gfx90a…"));
        assert_eq!(fit("gfx90a:xnack+", 20.0), None);
        assert_eq!(keep_tail("/a/b/libx.so", 80.0, 10.0), "…libx.so");
    }

    #[test]
    fn target_colours_are_stable_and_tell_common_targets_apart() {
        assert_eq!(target_colour("gfx90a"), target_colour("gfx90a"));
        let targets: Vec<&str> = PALETTE.iter().map(|(p, ..)| *p).collect();
        let colours: std::collections::BTreeSet<String> =
            targets.iter().map(|t| target_colour(t)).collect();
        assert_eq!(colours.len(), targets.len());
        assert_ne!(
            target_colour("gfx90a:xnack+"),
            target_colour("gfx90a:xnack-")
        );
    }

    #[test]
    fn sizes_read_like_a_person_writes_them() {
        assert_eq!(human(812), "812 B");
        assert_eq!(human(1_408_000_000), "1.3 GiB");
        assert_eq!(percent(1, 3), "33%");
        assert_eq!(percent(1, 300), "0.3%");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
