//! Squarified treemap layout (Bruls, Huizing, van Wijk 2000), computed here so the page is a
//! static SVG. No maintained Rust crate lays out treemaps without also drawing them, and the
//! algorithm is twenty lines.

/// An axis-aligned rectangle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

impl Rect {
    /// The rectangle shrunk by `by` on every side (never below zero size).
    pub fn inset(self, by: f64) -> Rect {
        Rect {
            x: self.x + by,
            y: self.y + by,
            w: (self.w - 2.0 * by).max(0.0),
            h: (self.h - 2.0 * by).max(0.0),
        }
    }
}

/// Lays `weights` (sorted largest first, as the algorithm expects) out over `area`: one
/// rectangle per weight, in the same order, with areas proportional to the weights and
/// aspect ratios kept close to 1. Zero weights get empty rectangles.
pub fn squarify(weights: &[u64], area: Rect) -> Vec<Rect> {
    let total: f64 = weights.iter().map(|&w| w as f64).sum();
    let mut out = Vec::with_capacity(weights.len());
    if total <= 0.0 || area.w <= 0.0 || area.h <= 0.0 {
        out.resize(
            weights.len(),
            Rect {
                w: 0.0,
                h: 0.0,
                ..area
            },
        );
        return out;
    }
    let scale = area.w * area.h / total;
    let sizes: Vec<f64> = weights.iter().map(|&w| w as f64 * scale).collect();
    let mut free = area;
    let mut start = 0;
    while start < sizes.len() {
        let side = free.w.min(free.h);
        // Grow the row while the worst aspect ratio in it improves.
        let mut end = start + 1;
        while end < sizes.len()
            && worst(&sizes[start..=end], side) <= worst(&sizes[start..end], side)
        {
            end += 1;
        }
        let row = &sizes[start..end];
        let row_area: f64 = row.iter().sum();
        // A column along the left edge of a wide area, else a row along the top edge.
        let column = free.w >= free.h;
        let side_len = if column { free.h } else { free.w };
        let thickness = if side_len > 0.0 {
            row_area / side_len
        } else {
            0.0
        };
        let mut along = 0.0;
        for s in row {
            let len = if thickness > 0.0 { s / thickness } else { 0.0 };
            out.push(if column {
                Rect {
                    x: free.x,
                    y: free.y + along,
                    w: thickness,
                    h: len,
                }
            } else {
                Rect {
                    x: free.x + along,
                    y: free.y,
                    w: len,
                    h: thickness,
                }
            });
            along += len;
        }
        free = if column {
            Rect {
                x: free.x + thickness,
                w: (free.w - thickness).max(0.0),
                ..free
            }
        } else {
            Rect {
                y: free.y + thickness,
                h: (free.h - thickness).max(0.0),
                ..free
            }
        };
        start = end;
    }
    out
}

/// The worst aspect ratio of a row of `sizes` laid along a side of length `side`.
fn worst(sizes: &[f64], side: f64) -> f64 {
    let sum: f64 = sizes.iter().sum();
    let (min, max) = sizes.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &s| {
        (lo.min(s), hi.max(s))
    });
    if sum <= 0.0 || min <= 0.0 {
        return f64::INFINITY;
    }
    let side2 = side * side;
    let sum2 = sum * sum;
    (side2 * max / sum2).max(sum2 / (side2 * min))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AREA: Rect = Rect {
        x: 10.0,
        y: 20.0,
        w: 600.0,
        h: 400.0,
    };

    #[test]
    fn rectangles_tile_the_area_in_proportion_to_their_weights() {
        let weights = [600, 600, 400, 200, 200, 100, 100, 6];
        let rects = squarify(&weights, AREA);
        let total: u64 = weights.iter().sum();
        for (w, r) in weights.iter().zip(&rects) {
            let expected = *w as f64 / total as f64 * AREA.w * AREA.h;
            assert!(
                (r.w * r.h - expected).abs() < 1e-6 * expected.max(1.0),
                "{r:?}"
            );
            assert!(r.x >= AREA.x - 1e-9 && r.x + r.w <= AREA.x + AREA.w + 1e-9);
            assert!(r.y >= AREA.y - 1e-9 && r.y + r.h <= AREA.y + AREA.h + 1e-9);
        }
        // No two rectangles overlap.
        for (i, a) in rects.iter().enumerate() {
            for b in &rects[i + 1..] {
                let ox = (a.x + a.w).min(b.x + b.w) - a.x.max(b.x);
                let oy = (a.y + a.h).min(b.y + b.h) - a.y.max(b.y);
                assert!(ox <= 1e-9 || oy <= 1e-9, "{a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn the_largest_weight_gets_a_squarish_rectangle_in_the_corner() {
        let rects = squarify(&[6, 6, 4, 3, 2, 2, 1], AREA);
        let first = rects[0];
        assert_eq!((first.x, first.y), (AREA.x, AREA.y));
        let aspect = first.w.max(first.h) / first.w.min(first.h);
        assert!(aspect < 2.0, "{first:?}");
    }

    #[test]
    fn zero_weights_and_empty_areas_give_empty_rectangles() {
        assert!(
            squarify(&[0, 0], AREA)
                .iter()
                .all(|r| r.w == 0.0 && r.h == 0.0)
        );
        let rects = squarify(&[5, 0], AREA);
        assert_eq!(rects.len(), 2);
        assert_eq!(rects[1].w * rects[1].h, 0.0);
    }
}
