//! Aggregation: per-thread HDR histograms and counters, merged at the end.
//!
//! Memory is fixed by the histograms (a few hundred KiB per thread), never by
//! the number of requests: nothing per request is kept.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::http1::{Failure, Response, Timing};

/// A latency histogram in microseconds (1 µs to 1 hour, 3 significant digits).
pub type Hist = Histogram<u64>;

/// A new, empty latency histogram.
pub fn new_hist() -> Hist {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Failed requests by ab's classes, plus failed checks by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failures {
    /// Connections that could not be established.
    pub connect: u64,
    /// Connections that failed or closed before a complete response.
    pub receive: u64,
    /// Bodies whose length differs from the first response's, or truncated bodies.
    pub length: u64,
    /// Write errors, malformed responses and timeouts.
    pub exceptions: u64,
    /// Responses that failed `--expect-*` checks, counted by reason.
    pub expectations: BTreeMap<String, u64>,
    /// First few error messages per class, for the report.
    pub samples: BTreeMap<String, u64>,
}

impl Failures {
    /// All failed requests.
    pub fn total(&self) -> u64 {
        self.connect
            + self.receive
            + self.length
            + self.exceptions
            + self.expectations.values().sum::<u64>()
    }
}

/// What one thread (or, merged, the whole run) observed.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Requests that came to an end, successful or not.
    pub complete: u64,
    /// Failures.
    pub failures: Failures,
    /// Responses with a status outside 200-299.
    pub non_2xx: u64,
    /// ab's "Keep-Alive requests": complete responses that announced
    /// keep-alive on a `-k` run, the first on each connection included.
    pub keepalive_requests: u64,
    /// All bytes read for complete responses.
    pub wire_bytes: u64,
    /// Body bytes of complete responses.
    pub body_bytes: u64,
    /// Status code counts.
    pub statuses: BTreeMap<u16, u64>,
    /// connect - start.
    pub connect: Hist,
    /// done - connect.
    pub processing: Hist,
    /// first byte - request written.
    pub waiting: Hist,
    /// done - start: the request's latency as ab measures it.
    pub total: Hist,
    /// done - intended send time (only with `--rate`): coordinated omission corrected.
    pub corrected: Hist,
    /// start - intended send time (only with `--rate`): how late loadgen
    /// itself sent each request. Large values mean loadgen, not the server,
    /// was the bottleneck.
    pub send_lag: Hist,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            complete: 0,
            failures: Failures::default(),
            non_2xx: 0,
            keepalive_requests: 0,
            wire_bytes: 0,
            body_bytes: 0,
            statuses: BTreeMap::new(),
            connect: new_hist(),
            processing: new_hist(),
            waiting: new_hist(),
            total: new_hist(),
            corrected: new_hist(),
            send_lag: new_hist(),
        }
    }
}

impl Recorder {
    /// Records a complete response. `doc_len` is the first response's body
    /// length (ab compares every later one against it; `None` with `-l`);
    /// `reasons` are the checks it failed.
    pub fn response(
        &mut self,
        t: &Timing,
        r: &Response,
        doc_len: Option<u64>,
        reasons: Vec<String>,
        intended: Option<Instant>,
    ) {
        self.complete += 1;
        if r.ab_keep_alive {
            self.keepalive_requests += 1;
        }
        *self.statuses.entry(r.status).or_default() += 1;
        if !(200..300).contains(&r.status) {
            self.non_2xx += 1;
        }
        self.wire_bytes += r.wire_bytes;
        self.body_bytes += r.body_len;
        self.connect
            .saturating_record(micros(t.connected - t.start));
        self.processing
            .saturating_record(micros(t.done - t.connected));
        self.waiting
            .saturating_record(micros(t.first_byte.saturating_duration_since(t.written)));
        self.total.saturating_record(micros(t.done - t.start));
        if let Some(at) = intended {
            self.corrected
                .saturating_record(micros(t.done.saturating_duration_since(at)));
            self.send_lag
                .saturating_record(micros(t.start.saturating_duration_since(at)));
        }
        if r.truncated || doc_len.is_some_and(|d| r.body_len != d) {
            self.failures.length += 1;
        } else if let Some(reason) = reasons.into_iter().next() {
            *self.failures.expectations.entry(reason).or_default() += 1;
        }
    }

    /// Records a request that ended without a complete response.
    pub fn failure(&mut self, f: &Failure) {
        self.complete += 1;
        let (class, msg) = match f {
            Failure::Connect(e) => {
                self.failures.connect += 1;
                ("connect", e.to_string())
            }
            Failure::Receive(m) => {
                self.failures.receive += 1;
                ("receive", m.clone())
            }
            Failure::Exception(m) => {
                self.failures.exceptions += 1;
                ("exception", m.clone())
            }
        };
        // Keep a bounded set of distinct messages so the report can say why.
        let key = format!("{class}: {msg}");
        if self.failures.samples.len() < 16 || self.failures.samples.contains_key(&key) {
            *self.failures.samples.entry(key).or_default() += 1;
        }
    }

    /// Adds another thread's observations to this one.
    pub fn merge(&mut self, o: &Recorder) {
        self.complete += o.complete;
        self.non_2xx += o.non_2xx;
        self.keepalive_requests += o.keepalive_requests;
        self.wire_bytes += o.wire_bytes;
        self.body_bytes += o.body_bytes;
        let f = &mut self.failures;
        f.connect += o.failures.connect;
        f.receive += o.failures.receive;
        f.length += o.failures.length;
        f.exceptions += o.failures.exceptions;
        for (k, v) in &o.failures.expectations {
            *f.expectations.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.failures.samples {
            *f.samples.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.statuses {
            *self.statuses.entry(*k).or_default() += v;
        }
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.connect.add(&o.connect);
        let _ = self.processing.add(&o.processing);
        let _ = self.waiting.add(&o.waiting);
        let _ = self.total.add(&o.total);
        let _ = self.corrected.add(&o.corrected);
        let _ = self.send_lag.add(&o.send_lag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(reused: bool, total_us: u64) -> Timing {
        let start = Instant::now();
        let done = start + Duration::from_micros(total_us);
        Timing {
            start,
            connected: start + Duration::from_micros(10),
            written: start + Duration::from_micros(20),
            first_byte: start + Duration::from_micros(30),
            done,
            reused,
        }
    }

    fn ok(status: u16, body_len: u64) -> Response {
        Response {
            status,
            wire_bytes: 100 + body_len,
            body_len,
            ..Response::default()
        }
    }

    /// A response that announced keep-alive on a `-k` run.
    fn kept(status: u16, body_len: u64) -> Response {
        Response {
            ab_keep_alive: true,
            ..ok(status, body_len)
        }
    }

    #[test]
    fn merge_adds_every_counter_histogram_and_reason() {
        let mut a = Recorder::default();
        a.response(
            &timing(false, 1_000),
            &ok(200, 5),
            Some(5),
            Vec::new(),
            None,
        );
        a.response(
            &timing(true, 2_000),
            &kept(503, 5),
            Some(5),
            vec!["status 503".into()],
            None,
        );
        a.failure(&Failure::Receive("closed".into()));
        let mut b = Recorder::default();
        b.response(
            &timing(true, 3_000),
            &kept(200, 7),
            Some(5),
            Vec::new(),
            None,
        );
        b.failure(&Failure::Exception("timeout".into()));
        b.failure(&Failure::Receive("closed".into()));

        let mut m = Recorder::default();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m.complete, 6);
        assert_eq!(m.keepalive_requests, 2);
        assert_eq!(m.non_2xx, 1);
        assert_eq!(m.statuses, BTreeMap::from([(200, 2), (503, 1)]));
        assert_eq!((m.wire_bytes, m.body_bytes), (317, 17));
        let f = &m.failures;
        // The 7-byte body differs from the first response's 5: a Length failure.
        assert_eq!((f.receive, f.exceptions, f.length, f.connect), (2, 1, 1, 0));
        assert_eq!(f.expectations, BTreeMap::from([("status 503".into(), 1)]));
        assert_eq!(f.samples["receive: closed"], 2);
        assert_eq!(f.total(), 5);
        assert_eq!(m.total.len(), 3);
        assert_eq!(m.total.max(), m.total.highest_equivalent(3_000));
        // Without --rate, nothing is corrected and nothing lags.
        assert!(m.corrected.is_empty() && m.send_lag.is_empty());
    }

    #[test]
    fn intended_times_feed_the_corrected_and_lag_histograms() {
        let mut r = Recorder::default();
        let t = timing(false, 1_000);
        let intended = t.start - Duration::from_micros(400);
        r.response(&t, &ok(200, 1), Some(1), Vec::new(), Some(intended));
        assert_eq!(r.corrected.max(), r.corrected.highest_equivalent(1_400));
        assert_eq!(r.send_lag.max(), r.send_lag.highest_equivalent(400));
    }

    #[test]
    fn a_response_fails_once_length_before_expectations() {
        let mut r = Recorder::default();
        // Truncated: a Length failure, whatever the checks said.
        let cut = Response {
            truncated: true,
            ..ok(200, 3)
        };
        r.response(&timing(false, 10), &cut, Some(3), vec!["x".into()], None);
        // Two failed checks count once, under the first reason.
        r.response(
            &timing(false, 10),
            &ok(500, 3),
            Some(3),
            vec!["status 500".into(), "body".into()],
            None,
        );
        // With -l (no reference length) a different length is no failure.
        r.response(&timing(false, 10), &ok(200, 9), None, Vec::new(), None);
        let f = &r.failures;
        assert_eq!(f.length, 1);
        assert_eq!(f.expectations, BTreeMap::from([("status 500".into(), 1)]));
        assert_eq!(f.total(), 2);
        assert_eq!((r.complete, r.non_2xx), (3, 1));
        // 1xx and 3xx are outside 200-299 too, as ab counts them.
        r.response(&timing(false, 10), &ok(304, 0), None, Vec::new(), None);
        assert_eq!(r.non_2xx, 2);
    }

    #[test]
    fn failure_messages_are_sampled_up_to_sixteen_distinct_ones() {
        let mut r = Recorder::default();
        for i in 0..40 {
            r.failure(&Failure::Exception(format!("timeout {}", i % 20)));
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        r.failure(&Failure::Connect(refused));
        assert_eq!((r.failures.exceptions, r.failures.connect), (40, 1));
        assert_eq!(r.failures.total(), 41);
        assert_eq!(r.complete, 41);
        // The first sixteen distinct messages keep counting; later ones and
        // the connect failure are counted in their class, not sampled.
        assert_eq!(r.failures.samples.len(), 16);
        assert_eq!(r.failures.samples["exception: timeout 0"], 2);
        assert!(!r.failures.samples.contains_key("exception: timeout 16"));
    }

    #[test]
    fn merging_an_empty_recorder_changes_nothing() {
        let mut a = Recorder::default();
        a.response(&timing(true, 500), &kept(200, 4), Some(4), Vec::new(), None);
        let before = a.clone();
        a.merge(&Recorder::default());
        assert_eq!((a.complete, a.keepalive_requests), (1, 1));
        assert_eq!(a.failures, before.failures);
        assert_eq!(a.statuses, before.statuses);
        assert!(a.total == before.total && a.connect == before.connect);
    }
}
