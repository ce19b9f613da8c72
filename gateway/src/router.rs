//! Routing as Tyk does it: `listen_path` is a raw string prefix of the request
//! path, and the longest matching prefix wins.
//!
//! `/gopl/` matches `/gopl/` and `/gopl/hello` but not `/gopl` or `/goplx`;
//! `/gopl` (no slash) matches all four. After routing, [`upstream_path`] strips
//! the listen path (when the API says so) and joins what is left onto the
//! target's base path with exactly one slash.
//!
//! # How a path finds its route
//!
//! With few APIs, [`Router::find`] compares the path with every listen
//! path, longest first, and the first that matches wins: a few
//! instructions per listen path it passes. With many (more than
//! [`SCAN_MAX`]), the listen paths are the keys of a radix tree over their
//! bytes (a node for every listen path and every byte where two of them
//! part, each edge holding the bytes its keys share with no sibling), and
//! `find` walks down as far as the path's bytes lead: the last node passed
//! that ends a listen path has the longest one the path starts with. A
//! request then costs one step per node on its way, however many APIs
//! there are; the scan alone cost one comparison per API passed, so a
//! request to the last of 2,000 paid for all 2,000.
//!
//! Measured with `gateway/benches/cg_many_apis.py --apis 1,15,40,2000
//! --rounds 3` (callgrind, one worker, `ab -c 10`, definitions without
//! middleware: the bench's 15 listen paths, then `/api0/`, `/api1/`, ...;
//! user instructions per request, median of 3, and inclusive in
//! `Proxy::plan`, which routes and checks the head and varies by a few
//! instructions from run to run where the whole request varies by
//! hundreds), for the route the scan reached first, in the middle and
//! last; the `quick` profile (no LTO), `GATEWAY_BIN` set to the build
//! before (`2f1716f`) and after, on the 2-core machine, 2026-12-07:
//!
//! | APIs | route (scan position) | whole request before -> after | `Proxy::plan` before -> after |
//! |---|---|---|---|
//! | 1 | `/plain/` | 23,082 -> 23,315 | 1,777 -> 1,845 |
//! | 15 | first `/jsvm-quickjs-response/` | 23,609 -> 23,721 | 1,788 -> 1,855 |
//! | 15 | middle `/jsvm-tykjson/` | 23,302 -> 23,480 | 1,879 -> 1,953 |
//! | 15 | last `/wasm/` | 23,181 -> 23,407 | 1,922 -> 2,002 |
//! | 40 | first `/jsvm-quickjs-response/` | 23,637 -> 24,097 | 1,789 -> 2,255 |
//! | 40 | middle `/api18/` | 23,399 -> 23,694 | 2,035 -> 2,162 |
//! | 40 | last `/api9/` | 23,700 -> 23,608 | 2,371 -> 2,069 |
//! | 2,000 | first `/jsvm-quickjs-response/` | 23,565 -> 24,162 | 1,788 -> 2,255 |
//! | 2,000 | middle `/api104/` | 41,107 -> 23,802 | 19,714 -> 2,346 |
//! | 2,000 | last `/api9/` | 58,953 -> 23,535 | 37,649 -> 2,159 |
//!
//! ("Before" is the median of 3 rounds, "after" one round of this code;
//! `Proxy::plan`'s three rounds never spread by more than 8.) With 2,000
//! APIs a request to the last-scanned route cost 2.5 times the first's;
//! now each costs ~2,150 to ~2,350 in `Proxy::plan` whatever its place.
//! The walk costs per step, ~80 instructions with its bounds checks
//! (`/jsvm-quickjs-response/` is six steps down: +467 over the scan that
//! found it first), against ~7 per listen path a scan passes: hence a
//! scan up to [`SCAN_MAX`] routes. With 1 and 15 APIs the scan
//! is the same code as before, yet `Proxy::plan` counts ~70 more: in this
//! build LLVM no longer inlines `h1up::encode_head` into it (its count
//! moves to `encode_head` itself, ~+400 there and ~-330 in `plan`), a
//! call's cost, not routing's; the whole request is within its
//! run-to-run spread.
//!
//! On the `release` profile (fat LTO, what the bench runs; `Proxy::plan`
//! is inlined there, so only whole requests are counted), the same
//! command, 3 rounds each, the build before (`2f1716f`'s router) and
//! after, median (min-max):
//!
//! | APIs | route (scan position) | before | after |
//! |---|---|---|---|
//! | 1 | `/plain/` | 21,508 (21,421-21,542) | 21,292 (21,136-21,379) |
//! | 15 | first | 21,820 (21,762-21,987) | 21,772 (21,702-21,781) |
//! | 15 | middle | 21,492 (21,463-21,511) | 21,447 (21,418-21,491) |
//! | 15 | last | 21,430 (21,366-21,595) | 21,319 (21,271-21,571) |
//! | 2,000 | first | 21,750 (21,723-21,924) | 22,176 (22,099-22,183) |
//! | 2,000 | middle | 38,175 (38,155-38,403) | 21,856 (21,752-21,901) |
//! | 2,000 | last | 55,437 (55,300-55,515) | 21,562 (21,389-21,733) |
//!
//! With few APIs nothing moved beyond the spread; with 2,000 the last
//! route's request costs what the first's does.

/// A node's `value` when no listen path ends at it.
const NONE: u32 = u32::MAX;

/// Up to this many routes, [`Router::find`] scans them longest first; past
/// it, it walks a tree. A scan costs a few instructions per listen path it
/// passes, a step of the tree several times more: with the bench's 15
/// routes the scan is the cheaper (see the figures above).
const SCAN_MAX: usize = 32;

/// Routes by listen path.
pub struct Router<T> {
    how: Index,
    /// The values, in the order given (so duplicates and all); the index
    /// holds positions in here.
    values: Vec<T>,
}

/// How the listen paths are searched.
enum Index {
    /// A few: every listen path, longest first (equal lengths in the order
    /// given), with its value's position; the first that matches wins.
    Scan(Vec<(Box<[u8]>, u32)>),
    /// Many: a radix tree.
    Tree(Tree),
}

/// A radix tree over the listen paths' bytes, laid out flat so that a
/// lookup follows indices, not pointers.
struct Tree {
    /// The tree's nodes; `nodes[0]` is the root. A node's children are
    /// consecutive, ordered by their first byte.
    nodes: Vec<Node>,
    /// `firsts[i]` is the first byte of node `i`'s edge (the root's is
    /// unused): a node's children's are one slice, searched for the path's
    /// next byte without touching the nodes themselves.
    firsts: Vec<u8>,
    /// Every edge's bytes after its first, end to end.
    edges: Vec<u8>,
}

/// One node of the tree: the edge that leads to it, its children, and the
/// listen path that ends here, if one does.
struct Node {
    /// The edge's bytes after its first: `edges[rest..rest + rest_len]`
    /// (the root's edge has no first: it is all here).
    rest: u32,
    rest_len: u32,
    /// The children: `nodes[kids..kids + kids_len]`.
    kids: u32,
    kids_len: u32,
    /// The position in the router's values of the listen path that ends
    /// at this node, or [`NONE`].
    value: u32,
}

impl<T> Router<T> {
    /// Builds a router from `(listen_path, value)` pairs.
    ///
    /// Of two pairs with the same listen path the first wins, as in the
    /// longest-first scan (duplicates are refused at load, so this is only
    /// the router's own contract).
    pub fn new(routes: Vec<(String, T)>) -> Self {
        let tree = routes.len() > SCAN_MAX;
        Router::build(routes, tree)
    }

    fn build(routes: Vec<(String, T)>, tree: bool) -> Self {
        let mut keys: Vec<(&[u8], u32)> = routes
            .iter()
            .enumerate()
            .map(|(i, (path, _))| (path.as_bytes(), index(i)))
            .collect();
        let how = if !tree {
            // Stable: equal lengths keep the order given.
            keys.sort_by_key(|k| std::cmp::Reverse(k.0.len()));
            Index::Scan(keys.iter().map(|&(k, v)| (k.into(), v)).collect())
        } else {
            // Stable: equal paths keep their order, and the first is kept.
            keys.sort_by(|a, b| a.0.cmp(b.0));
            keys.dedup_by(|later, first| later.0 == first.0);
            Index::Tree(Tree::new(&keys))
        };
        let values = routes.into_iter().map(|(_, v)| v).collect();
        Router { how, values }
    }

    /// The route whose listen path is the longest prefix of `path`.
    ///
    /// Listen paths and edges are compared in line (a few 4- to 16-byte
    /// loads), not by a call to libc's `memcmp`. The scan is inlined into
    /// the caller, as it was alone; the tree's walk is a call of its own.
    #[inline(always)]
    pub fn find(&self, path: &str) -> Option<&T> {
        let path = path.as_bytes();
        let found = match &self.how {
            Index::Scan(routes) => routes
                .iter()
                .find(|(prefix, _)| {
                    path.get(..prefix.len())
                        .is_some_and(|p| crate::intern::same(p, prefix))
                })
                .map(|&(_, v)| v),
            Index::Tree(tree) => tree.find(path),
        };
        found.map(|v| &self.values[v as usize])
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when there are no routes.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl Tree {
    /// The tree of `keys` (listen path, value), sorted and without
    /// duplicates.
    fn new(keys: &[(&[u8], u32)]) -> Tree {
        // The root's edge is what every listen path starts with (`/`, or
        // all of a lone one): a request that does not start so is
        // refused in one comparison, and one that does starts below it.
        let lead = match (keys.first(), keys.last()) {
            (Some(first), Some(last)) => &first.0[..shared(first.0, last.0)],
            _ => &[][..],
        };
        let mut tree = Tree {
            nodes: vec![Node {
                rest_len: index(lead.len()),
                ..Node::empty()
            }],
            firsts: vec![0],
            edges: lead.to_vec(),
        };
        tree.grow(keys, lead.len());
        tree
    }

    /// Builds the tree under the root. Each piece of work is a run of keys
    /// that share their first `depth` bytes and belong under node `at`; a
    /// stack, not recursion, so a deep tree cannot overflow the thread's
    /// stack.
    fn grow(&mut self, keys: &[(&[u8], u32)], lead: usize) {
        let mut work = vec![(0..keys.len(), lead, 0usize)];
        while let Some((mut run, depth, at)) = work.pop() {
            // Sorted, the one key that ends here (if any) comes first.
            if run.start < run.end && keys[run.start].0.len() == depth {
                self.nodes[at].value = keys[run.start].1;
                run.start += 1;
            }
            let kids = self.nodes.len();
            let mut i = run.start;
            while i < run.end {
                // The keys that go on with the same byte become one child.
                let byte = keys[i].0[depth];
                let j = i + keys[i..run.end].partition_point(|k| k.0[depth] == byte);
                // Sorted, what the first and last of them share all share.
                let (first, last) = (keys[i].0, keys[j - 1].0);
                let end = shared(first, last);
                let rest = &first[depth + 1..end];
                self.nodes.push(Node {
                    rest: index(self.edges.len()),
                    rest_len: index(rest.len()),
                    ..Node::empty()
                });
                self.firsts.push(byte);
                self.edges.extend_from_slice(rest);
                work.push((i..j, end, self.nodes.len() - 1));
                i = j;
            }
            self.nodes[at].kids = index(kids);
            self.nodes[at].kids_len = index(self.nodes.len() - kids);
        }
    }

    /// The value of the longest listen path `path` starts with.
    ///
    /// One step per node on the way down: the path's next byte picks a
    /// child (a short loop over the children's first bytes, a binary
    /// search over many), then the child's edge is compared; the last
    /// node passed that ends a listen path has the longest.
    #[inline(never)]
    fn find(&self, path: &[u8]) -> Option<u32> {
        let mut node = &self.nodes[0];
        let lead = &self.edges[span(node.rest, node.rest_len)];
        let mut at = lead.len();
        match path.get(..at) {
            Some(p) if same(p, lead) => {}
            _ => return None,
        }
        let mut found = node.value;
        while let Some(&byte) = path.get(at) {
            let kids = &self.firsts[span(node.kids, node.kids_len)];
            let Some(k) = pick(kids, byte) else { break };
            node = &self.nodes[node.kids as usize + k];
            let rest = &self.edges[span(node.rest, node.rest_len)];
            let end = at + 1 + rest.len();
            match path.get(at + 1..end) {
                Some(p) if same(p, rest) => at = end,
                _ => break,
            }
            if node.value != NONE {
                found = node.value;
            }
        }
        (found != NONE).then_some(found)
    }
}

impl Node {
    fn empty() -> Self {
        Node {
            rest: 0,
            rest_len: 0,
            kids: 0,
            kids_len: 0,
            value: NONE,
        }
    }
}

/// Which of a node's children (their first bytes, ascending) starts with
/// `byte`. Most nodes have a few: a loop over them is cheaper than a search.
#[inline]
fn pick(kids: &[u8], byte: u8) -> Option<usize> {
    if kids.len() <= 8 {
        kids.iter().position(|&b| b == byte)
    } else {
        kids.binary_search(&byte).ok()
    }
}

/// Whether an edge's bytes are the path's: short edges (most, in a tree
/// of many listen paths) byte by byte, longer ones as
/// [`crate::intern::same`] compares header names.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    match a.len() {
        0 => true,
        1 => a[0] == b[0],
        2 | 3 => a[0] == b[0] && a[1] == b[1] && a[a.len() - 1] == b[a.len() - 1],
        _ => crate::intern::same(a, b),
    }
}

fn span(start: u32, len: u32) -> std::ops::Range<usize> {
    start as usize..start as usize + len as usize
}

/// How many bytes `a` and `b` start with in common.
fn shared(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A count or offset as the tree stores it.
fn index(n: usize) -> u32 {
    u32::try_from(n).expect("a router over fewer than 4 GiB of listen paths")
}

/// Trims `listen_path` from the front of `path`, keeping a leading `/`.
///
/// `strip("/gopl/", "/gopl/hello/")` is `/hello/`; `strip("/gopl/", "/gopl/")`
/// is `/`. A path that does not start with the listen path is returned as is.
pub fn strip(listen_path: &str, path: &str) -> String {
    match path.strip_prefix(listen_path) {
        Some(rest) if rest.starts_with('/') => rest.to_string(),
        Some(rest) => format!("/{rest}"),
        None => path.to_string(),
    }
}

/// Joins a target base path and a request path as Tyk's `singleJoiningSlash`
/// does: trailing slashes of the base and leading slashes of the path go,
/// one slash joins them, and an empty remainder adds nothing (target
/// `http://h/base` with request `/` goes to `/base`, not `/base/`).
pub fn join(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    let sub = path.trim_start_matches('/');
    match (base.is_empty(), sub.is_empty()) {
        // Go sends an empty path as `/`.
        (true, true) => "/".to_string(),
        (false, true) => base.to_string(),
        _ => format!("{base}/{sub}"),
    }
}

/// The path sent upstream for `path` on an API.
pub fn upstream_path(listen_path: &str, strip_listen_path: bool, base: &str, path: &str) -> String {
    if strip_listen_path {
        join(base, &strip(listen_path, path))
    } else {
        join(base, path)
    }
}

/// The origin-form request target sent upstream: [`upstream_path`], then
/// the target URL's own query and the request's, joined with `&` as Tyk's
/// director does. Held as its pieces; [`Target::string`] and
/// [`Target::write_into`] join them.
pub struct Target<'a> {
    /// The target URL's base path, without trailing slashes.
    base: &'a str,
    /// The request's path after the listen path, without leading slashes.
    sub: &'a str,
    target_query: Option<&'a str>,
    query: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// The target for `path` and `query` on an API with this listen path
    /// (stripped or not) and this target base path and query.
    pub fn new(
        listen_path: &str,
        strip_listen_path: bool,
        base: &'a str,
        path: &'a str,
        target_query: Option<&'a str>,
        query: Option<&'a str>,
    ) -> Self {
        let rest = match strip_listen_path {
            true => path.strip_prefix(listen_path).unwrap_or(path),
            false => path,
        };
        // As `join`: the slashes between the base and the rest become one.
        Target {
            base: base.trim_end_matches('/'),
            sub: rest.trim_start_matches('/'),
            target_query: target_query.filter(|q| !q.is_empty()),
            query: query.filter(|q| !q.is_empty()),
        }
    }

    fn len(&self) -> usize {
        let path = match (self.base.is_empty(), self.sub.is_empty()) {
            (true, true) => 1,
            (false, true) => self.base.len(),
            _ => self.base.len() + 1 + self.sub.len(),
        };
        let query = match (self.target_query, self.query) {
            (None, None) => 0,
            (Some(q), None) | (None, Some(q)) => 1 + q.len(),
            (Some(t), Some(r)) => 2 + t.len() + r.len(),
        };
        path + query
    }

    /// In one string of exactly its length: turned into `Bytes` (and so a
    /// `Uri`), it keeps its buffer instead of being copied.
    pub fn string(&self) -> String {
        let mut out = String::with_capacity(self.len());
        self.write(|piece| out.push_str(piece));
        out
    }

    /// Written at the end of `dst` (an upstream request's head), with no
    /// string of its own.
    pub fn write_into(&self, dst: &mut Vec<u8>) {
        self.write(|piece| dst.extend_from_slice(piece.as_bytes()));
    }

    fn write(&self, mut put: impl FnMut(&str)) {
        match (self.base.is_empty(), self.sub.is_empty()) {
            // Go sends an empty path as `/`.
            (true, true) => put("/"),
            (false, true) => put(self.base),
            _ => {
                put(self.base);
                put("/");
                put(self.sub);
            }
        }
        for (i, q) in self.target_query.into_iter().chain(self.query).enumerate() {
            put(if i == 0 { "?" } else { "&" });
            put(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_prefixes_are_raw() {
        let r = Router::new(vec![
            ("/gopl/".to_string(), "slash"),
            ("/gopl".to_string(), "bare"),
            ("/gopl/deep/".to_string(), "deep"),
        ]);
        assert_eq!(r.find("/gopl/hello"), Some(&"slash"));
        assert_eq!(r.find("/gopl/deep/x"), Some(&"deep"));
        assert_eq!(r.find("/gopl"), Some(&"bare"));
        assert_eq!(r.find("/goplx"), Some(&"bare"));
        assert_eq!(r.find("/other"), None);
        let only_slash = Router::new(vec![("/gopl/".to_string(), ())]);
        assert_eq!(only_slash.find("/gopl"), None);
        assert_eq!(only_slash.find("/goplx"), None);
        // Listen paths of every length up to 40: a path that differs from
        // one in any single byte is not routed to it.
        for n in 1..=40 {
            let lp: String = (0..n).map(|i| (b'a' + i % 26) as char).collect();
            let r = Router::new(vec![(lp.clone(), n)]);
            assert_eq!(r.find(&format!("{lp}/x")), Some(&n), "{lp}");
            assert_eq!(r.find(&lp[..n as usize - 1]), None, "{lp}");
            for i in 0..n as usize {
                let mut other = lp.clone().into_bytes();
                other[i] = b'Z';
                assert_eq!(
                    r.find(std::str::from_utf8(&other).unwrap()),
                    None,
                    "{lp} byte {i}"
                );
            }
        }
    }

    /// The router this tree replaced, kept as the reference: every listen
    /// path, longest first (equal lengths in the order given), and the
    /// first that is a prefix of the path wins.
    fn scan<'a, T>(routes: &'a [(String, T)], path: &str) -> Option<&'a T> {
        let mut sorted: Vec<&(String, T)> = routes.iter().collect();
        sorted.sort_by_key(|r| std::cmp::Reverse(r.0.len()));
        sorted
            .into_iter()
            .find(|(prefix, _)| path.as_bytes().starts_with(prefix.as_bytes()))
            .map(|(_, v)| v)
    }

    /// A random string over `alphabet`, up to `max` pieces long; the
    /// pieces are single bytes and a few longer runs, so that listen paths
    /// share long prefixes and part in the middle of an edge.
    fn random_path(rng: &mut fastrand::Rng, alphabet: &[&str], max: usize) -> String {
        (0..rng.usize(0..=max))
            .map(|_| alphabet[rng.usize(..alphabet.len())])
            .collect()
    }

    #[test]
    fn the_tree_routes_as_the_longest_first_scan_did() {
        // Few distinct bytes, so paths collide, nest and share prefixes;
        // a `%` escape and non-ASCII characters (two and three bytes in
        // UTF-8, one sharing its lead byte with the other) as well.
        let alphabet = ["/", "a", "b", "/a", "ab/", "%2F", "é", "é/", "€", "-"];
        let (mut rng, cases) = (fastrand::Rng::with_seed(0x7a11), 600);
        for case in 0..cases {
            let n = match case % 4 {
                0 => rng.usize(0..4),
                1 => rng.usize(0..20),
                _ => rng.usize(0..200),
            };
            let mut routes: Vec<(String, usize)> = (0..n)
                .map(|i| (random_path(&mut rng, &alphabet, 6), i))
                .collect();
            // Now and then the empty listen path, the `/` catch-all and a
            // duplicate (the first of two wins, as in the scan).
            for extra in ["", "/"] {
                if rng.u8(..) < 40 {
                    let i = routes.len();
                    routes.insert(rng.usize(..=i), (extra.to_string(), i));
                }
            }
            if !routes.is_empty() && rng.bool() {
                let copy = routes[rng.usize(..routes.len())].0.clone();
                let i = routes.len();
                routes.insert(rng.usize(..=i), (copy, i));
            }
            // The router as it chooses (a scan up to SCAN_MAX routes),
            // and the tree whatever the count.
            let router = Router::new(routes.clone());
            let tree = Router::build(routes.clone(), true);
            assert_eq!(router.len(), routes.len());
            // Paths that are listen paths, extend one, stop inside one, or
            // are random.
            for _ in 0..60 {
                let path = match (routes.is_empty(), rng.u8(..4)) {
                    (false, 0) => routes[rng.usize(..routes.len())].0.clone(),
                    (false, 1) => {
                        let lp = &routes[rng.usize(..routes.len())].0;
                        format!("{lp}{}", random_path(&mut rng, &alphabet, 3))
                    }
                    (false, 2) => {
                        let lp = &routes[rng.usize(..routes.len())].0;
                        let cut = rng.usize(0..=lp.len());
                        lp.get(..cut).unwrap_or(lp).to_string()
                    }
                    _ => random_path(&mut rng, &alphabet, 8),
                };
                let want = scan(&routes, &path);
                let what = || format!("case {case}: path {path:?} over {routes:?}");
                assert_eq!(router.find(&path), want, "{}", what());
                assert_eq!(tree.find(&path), want, "tree: {}", what());
            }
        }
    }

    #[test]
    fn ties_empty_and_catch_all_route_as_before() {
        for tree in [false, true] {
            ties_empty_and_catch_all(tree);
        }
    }

    fn ties_empty_and_catch_all(tree: bool) {
        let routes = |v: &[&str]| -> Vec<(String, usize)> {
            v.iter()
                .enumerate()
                .map(|(i, p)| (p.to_string(), i))
                .collect()
        };
        let new = |v: &[&str]| Router::build(routes(v), tree);
        // Of two equal listen paths the first given wins.
        let r = new(&["/a/", "/b/", "/a/"]);
        assert_eq!(r.find("/a/x"), Some(&0));
        assert_eq!(r.len(), 3);
        // The empty listen path matches everything; `/` every path that
        // starts with one (and an empty path only the empty listen path).
        let r = new(&["", "/", "/a"]);
        assert_eq!(r.find(""), Some(&0));
        assert_eq!(r.find("x"), Some(&0));
        assert_eq!(r.find("/"), Some(&1));
        assert_eq!(r.find("/b"), Some(&1));
        assert_eq!(r.find("/ab"), Some(&2));
        let none: Router<()> = Router::build(Vec::new(), tree);
        assert!(none.is_empty());
        assert_eq!(none.find("/"), None);
        // Bytes are bytes: a non-ASCII listen path matches only its own
        // encoding, and a `%` escape only itself.
        let r = new(&["/é/", "/%C3%A9/", "/e"]);
        assert_eq!(r.find("/é/x"), Some(&0));
        assert_eq!(r.find("/%C3%A9/x"), Some(&1));
        assert_eq!(r.find("/€/"), None);
        assert_eq!(r.find("/ex"), Some(&2));
    }

    #[test]
    fn strip_and_join_follow_tyk() {
        assert_eq!(upstream_path("/gopl/", true, "", "/gopl/hello/"), "/hello/");
        assert_eq!(upstream_path("/gopl/", true, "/base", "/gopl/x"), "/base/x");
        assert_eq!(upstream_path("/gopl/", true, "", "/gopl/"), "/");
        assert_eq!(upstream_path("/gopl/", true, "/base", "/gopl/"), "/base");
        assert_eq!(
            upstream_path("/gopl/", true, "/base", "/gopl//x"),
            "/base/x"
        );
        assert_eq!(upstream_path("/gopl", true, "/base", "/goplx"), "/base/x");
        assert_eq!(
            upstream_path("/gopl/", false, "", "/gopl/hello"),
            "/gopl/hello"
        );
        assert_eq!(
            upstream_path("/gopl/", false, "/base", "/gopl/a"),
            "/base/gopl/a"
        );
    }

    #[test]
    fn the_target_in_one_string_is_the_path_and_both_queries() {
        for (lp, strip, base, path) in [
            ("/gopl/", true, "", "/gopl/hello/"),
            ("/gopl/", true, "/base", "/gopl/x"),
            ("/gopl/", true, "", "/gopl/"),
            ("/gopl/", true, "/base/", "/gopl/"),
            ("/gopl/", true, "/base", "/gopl//x"),
            ("/gopl", true, "/base", "/goplx"),
            ("/gopl/", false, "", "/gopl/hello"),
            ("/gopl/", false, "/base", "/gopl/a"),
            ("/other/", true, "/b", "/x"),
        ] {
            let p = upstream_path(lp, strip, base, path);
            for (tq, q, want) in [
                (None, None, p.clone()),
                (Some(""), Some(""), p.clone()),
                (Some("k=1"), None, format!("{p}?k=1")),
                (None, Some("a=2"), format!("{p}?a=2")),
                (Some("k=1"), Some("a=2"), format!("{p}?k=1&a=2")),
            ] {
                let target = Target::new(lp, strip, base, path, tq, q);
                let got = target.string();
                assert_eq!(got, want, "{lp} {strip} {base} {path} {tq:?} {q:?}");
                assert_eq!(got.capacity(), got.len());
                // Written into a head after what it already holds.
                let mut head = b"GET ".to_vec();
                target.write_into(&mut head);
                assert_eq!(head, format!("GET {want}").into_bytes());
            }
        }
    }
}
