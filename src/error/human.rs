//! Durations as messages show them: rounded to what a reader acts on
//! (`599 ms`, `1.5 s`, `42 s`, `3 min 20 s`, `2 h 5 min`), and below the
//! resolution of what was measured `less than 1 ms` (or `1 s`), never
//! `0ns` or `1.482913s`.

use std::fmt;
use std::time::Duration;

/// A duration to show to people, and the resolution it was measured to:
/// anything shorter than the second reads "less than" it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Human(Duration, Duration);

impl Human {
    /// A duration measured to the millisecond or better.
    pub(crate) fn new(duration: Duration) -> Self {
        Self(duration, Duration::from_millis(1))
    }

    /// A duration read in whole seconds (a server's uptime).
    pub(crate) fn seconds(duration: Duration) -> Self {
        Self(duration, Duration::from_secs(1))
    }
}

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Human(d, floor) = *self;
        if d < floor {
            return write!(f, "less than {}", Human::new(floor));
        }
        let secs = d.as_secs();
        let (h, min, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        match secs {
            0 => write!(f, "{} ms", d.as_millis()),
            1..=9 => match (d.as_millis() + 50) / 100 {
                tenths if tenths % 10 == 0 => write!(f, "{} s", tenths / 10),
                tenths => write!(f, "{}.{} s", tenths / 10, tenths % 10),
            },
            10..=59 => write!(f, "{secs} s"),
            60..=3599 if s == 0 => write!(f, "{min} min"),
            60..=3599 => write!(f, "{min} min {s} s"),
            _ if min == 0 => write!(f, "{h} h"),
            _ => write!(f, "{h} h {min} min"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        let shown = |d| Human::new(d).to_string();
        assert_eq!(shown(Duration::ZERO), "less than 1 ms");
        assert_eq!(shown(Duration::from_micros(999)), "less than 1 ms");
        assert_eq!(shown(ms(1)), "1 ms");
        assert_eq!(shown(ms(599)), "599 ms");
        assert_eq!(shown(ms(1482)), "1.5 s");
        assert_eq!(shown(s(42)), "42 s");
        assert_eq!(shown(s(60)), "1 min");
        assert_eq!(shown(s(200)), "3 min 20 s");
        assert_eq!(shown(s(7200)), "2 h");
        assert_eq!(shown(s(7500)), "2 h 5 min");
        assert_eq!(shown(Duration::MAX), "5124095576030431 h");
        let uptime = |d| Human::seconds(d).to_string();
        assert_eq!(shown(ms(9960)), "10 s");
        assert_eq!(uptime(Duration::ZERO), "less than 1 s");
        assert_eq!(uptime(s(3)), "3 s");
    }
}
