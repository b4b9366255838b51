//! The report page as a browser shows it: headless Chromium renders it, and the screenshot
//! must show the treemap (the legend's colours filling the treemap area), not a blank or
//! broken page.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_report::html::{self, PAGE, TREEMAP};
use kpack_testkit::{fixture, run_tool};

/// Renders `page` in headless Chromium at the page's size; returns the RGB pixels.
fn screenshot(page: &Path, work: &Path) -> (u32, u32, Vec<u8>) {
    let png_path = work.join("shot.png");
    let profile = work.join("profile");
    let size = format!("--window-size={},{}", PAGE.w, PAGE.h);
    run_tool(
        "chromium",
        &[
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            // Screenshot only once everything is painted (without these, a large page can
            // be caught half drawn).
            "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=5000",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--screenshot={}", png_path.display()),
            &size,
            &format!("file://{}", page.display()),
        ],
    );
    let file = std::fs::File::open(&png_path)
        .unwrap_or_else(|e| panic!("chromium wrote no screenshot {}: {e}", png_path.display()));
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a sane PNG")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = info.color_type.samples();
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, rgb)
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

#[test]
fn chromium_shows_the_treemap_in_the_legend_colours() {
    let files: Vec<PathBuf> = ["bin/libtwo.so", "modern/libmodern_two_v3.so"]
        .iter()
        .map(|f| fixture(f))
        .collect();
    let usage = kpack_report::collect(&files, &mut || {}).unwrap();
    let work = tempfile::tempdir().unwrap();
    let page = work.path().join("report.html");
    kpack_report::write_html(&usage, "fixtures", &page).unwrap();

    let (width, height, pixels) = screenshot(&page, work.path());
    assert_eq!((width, height), (PAGE.w as u32, PAGE.h as u32));

    // Every target's colour, and host grey.
    let mut legend: BTreeMap<[u8; 3], String> = usage
        .targets
        .iter()
        .map(|t| (rgb(&html::target_colour(&t.target)), t.target.clone()))
        .collect();
    legend.insert(rgb("#8c8c8c"), "host code".to_owned());
    assert!(legend.len() >= 7, "{legend:?}");

    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let mut area = 0u64;
    for y in TREEMAP.y as u32..(TREEMAP.y + TREEMAP.h) as u32 {
        for x in TREEMAP.x as u32..(TREEMAP.x + TREEMAP.w) as u32 {
            area += 1;
            let at = ((y * width + x) * 3) as usize;
            let px = [pixels[at], pixels[at + 1], pixels[at + 2]];
            if let Some(name) = legend.get(&px) {
                *seen.entry(name.clone()).or_default() += 1;
            }
        }
    }
    let covered: u64 = seen.values().sum();
    // Visible blocks: at least 1% of the treemap each.
    let blocks = seen.values().filter(|&&n| n * 100 >= area).count();
    assert!(
        blocks >= 6,
        "only {blocks} legend colours fill the treemap: {seen:?}"
    );
    assert!(
        covered * 100 >= area * 80,
        "legend colours cover {covered} of {area} treemap pixels: {seen:?}"
    );
    // The legend beside it has a swatch for every target.
    for t in &usage.targets {
        let swatch = rgb(&html::target_colour(&t.target));
        let swatch_pixels = (TREEMAP.y as u32..height)
            .flat_map(|y| ((TREEMAP.x + TREEMAP.w) as u32..width).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let at = ((y * width + x) * 3) as usize;
                pixels[at..at + 3] == swatch
            })
            .count();
        assert!(swatch_pixels >= 100, "no legend swatch for {}", t.target);
    }
}
