//! Underscore's `_` on both engines through the real gateway: our own
//! implementation against underscore 1.x's documented behaviour, loaded on
//! first use in every strategy, and replaceable by a script.
#![recursion_limit = "256"]

mod common;
mod js_tykapi;

use http::StatusCode;
use serde_json::{json, Value};

use common::*;
use js_tykapi::*;

/// Our underscore against underscore's documented behaviour, on both
/// engines: the same expressions, the same answers.
#[test]
fn underscore_behaves_as_documented() {
    let cases = r#"
        var r = {};
        var out = [], ctx = {m: 10};
        _.each([1, 2, 3], function (v, i, list) { out.push(v * this.m + i + list.length); }, ctx);
        r.eachContext = out;
        var keys = [];
        r.eachReturns = _.each({a: 1, b: 2}, function (v, k) { keys.push(k + v); }) !== undefined;
        r.eachObject = keys;
        r.mapObject = _.map({a: 1, b: 2}, function (v, k) { return k + v * 2; });
        r.mapProperty = _.map([{n: "x"}, {n: "y"}], "n");
        r.filter = _.filter([1, 2, 3, 4, 5, 6], function (n) { return n % 2 === 0; });
        r.filterMatch = _.filter([{a: 1, b: 2}, {a: 2}, {a: 1}], {a: 1});
        r.find = _.find([1, 2, 3, 4], function (n) { return n > 2; });
        r.findNone = _.find([1, 2], function (n) { return n > 5; }) === undefined;
        r.reduce = _.reduce([1, 2, 3], function (memo, n) { return memo + n; }, 10);
        r.reduceNoMemo = _.reduce([[0, 1], [2, 3]], function (a, b) { return a.concat(b); });
        r.reduceObject = _.reduce({a: 1, b: 2}, function (memo, v, k) { return memo + k + v; }, "");
        r.keys = _.keys({one: 1, two: 2});
        r.keysOfPrimitive = _.keys(5);
        r.values = _.values({one: 1, two: 2});
        var dest = {a: 1};
        r.extendSame = _.extend(dest, {b: 2}, {a: 3}) === dest;
        r.extend = dest;
        r.pick = _.pick({name: "moe", age: 50, userid: "moe1"}, "name", "age");
        r.pickArray = _.pick({name: "moe", age: 50}, ["age"]);
        r.pickFn = _.pick({name: "moe", age: 50}, function (v) { return typeof v === "number"; });
        r.omit = _.omit({name: "moe", age: 50, userid: "moe1"}, "userid");
        r.omitFn = _.omit({name: "moe", age: 50}, function (v) { return typeof v === "number"; });
        r.contains = [_.contains([1, 2, 3], 3), _.contains([1, 2], 5), _.contains({a: 7}, 7), _.contains([NaN], NaN), _.contains([1, 2, 3], 1, 1)];
        r.isEmpty = [_.isEmpty({}), _.isEmpty([]), _.isEmpty(""), _.isEmpty(null), _.isEmpty(undefined), _.isEmpty({a: 1}), _.isEmpty([0]), _.isEmpty("x")];
        r.has = [_.has({a: 1}, "a"), _.has({a: 1}, "toString"), _.has({a: {b: 1}}, ["a", "b"]), _.has(null, "a")];
        var orig = {a: {deep: 1}, b: 2}, copy = _.clone(orig);
        r.clone = [copy !== orig, copy.a === orig.a, copy.b, _.clone(5), _.clone([1, 2]).length];
        r.types = [_.isString("s"), _.isString(1), _.isArray([]), _.isArray({length: 0}), _.isObject({}), _.isObject(function () {}),
                   _.isObject(null), _.isObject("s"), _.isFunction(_.each), _.isFunction({})];
        r.first = [_.first([5, 4, 3]), _.first([5, 4, 3], 2), _.first([]) === undefined];
        r.last = [_.last([5, 4, 3]), _.last([5, 4, 3], 2), _.last([], 2)];
        r.uniq = _.uniq([1, 2, 1, 4, 1, 3]);
        r.uniqSorted = _.uniq([1, 1, 2, 2, 3], true);
        r.uniqIteratee = _.uniq([{id: 1, n: "a"}, {id: 2}, {id: 1, n: "b"}], function (x) { return x.id; });
        r.uniqProperty = _.uniq([{id: 1, n: "a"}, {id: 1, n: "b"}], "id");
        r.sortBy = _.sortBy([1, 2, 3, 4, 5, 6], function (n) { return Math.sin(n); });
        r.sortByStable = _.pluck(_.sortBy([{n: "a", k: 1}, {n: "b", k: 0}, {n: "c", k: 1}, {n: "d", k: 0}], "k"), "n");
        r.sortByUndefinedLast = _.sortBy([3, undefined, 1], _.identity);
        r.groupBy = _.groupBy([1.3, 2.1, 2.4], function (n) { return Math.floor(n); });
        r.groupByLength = _.groupBy(["one", "two", "three"], "length");
        r.without = _.without([1, 2, 1, 0, 3, 1, 4], 0, 1);
        r.template = _.template("hello: <%= name %> <%- html %><% if (n) { %>!<% } %>")({name: "moe", html: "<b>", n: 1});
        return r;
    "#;
    let expected = json!({
        "eachContext": [13, 24, 35],
        "eachReturns": true,
        "eachObject": ["a1", "b2"],
        "mapObject": ["a2", "b4"],
        "mapProperty": ["x", "y"],
        "filter": [2, 4, 6],
        "filterMatch": [{"a": 1, "b": 2}, {"a": 1}],
        "find": 3,
        "findNone": true,
        "reduce": 16,
        "reduceNoMemo": [0, 1, 2, 3],
        "reduceObject": "a1b2",
        "keys": ["one", "two"],
        "keysOfPrimitive": [],
        "values": [1, 2],
        "extendSame": true,
        "extend": {"a": 3, "b": 2},
        "pick": {"name": "moe", "age": 50},
        "pickArray": {"age": 50},
        "pickFn": {"age": 50},
        "omit": {"name": "moe", "age": 50},
        "omitFn": {"name": "moe"},
        "contains": [true, false, true, true, false],
        "isEmpty": [true, true, true, true, true, false, false, false],
        "has": [true, false, true, false],
        "clone": [true, true, 2, 5, 2],
        "types": [true, false, true, false, true, true, false, false, true, false],
        "first": [5, [5, 4], true],
        "last": [3, [4, 3], []],
        "uniq": [1, 2, 4, 3],
        "uniqSorted": [1, 2, 3],
        "uniqIteratee": [{"id": 1, "n": "a"}, {"id": 2}],
        "uniqProperty": [{"id": 1, "n": "a"}],
        "sortBy": [5, 4, 6, 3, 1, 2],
        "sortByStable": ["b", "d", "a", "c"],
        "sortByUndefinedLast": [1, 3, null],
        "groupBy": {"1": [1.3], "2": [2.1, 2.4]},
        "groupByLength": {"3": ["one", "two"], "5": ["three"]},
        "without": [2, 3, 4],
        "template": "hello: moe &lt;b&gt;!"
    });
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "under",
            "/under/",
            up,
            engine,
            &answering(cases),
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        let got = get(gw.addr, "/under/");
        assert_eq!(got.status, StatusCode::OK, "{engine}: {}", got.text());
        let v = got.json();
        for (k, want) in expected.as_object().unwrap() {
            assert_eq!(&v[k], want, "{engine}: _.{k}");
        }
        gw.stop();
    }
}

/// `_` is loaded on first use, per context, in every strategy; a script
/// may replace it.
#[test]
fn underscore_is_there_in_fresh_contexts_and_can_be_replaced() {
    for engine in ENGINES {
        let (up, _rec) = recorder();
        let dir = tempfile::tempdir().unwrap();
        js_api(
            dir.path(),
            "fresh",
            "/fresh/",
            up,
            engine,
            &answering("return _.keys({a: 1});"),
            Value::Null,
        );
        let mut def: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("fresh.json")).unwrap()).unwrap();
        def["custom_middleware"]["strategy"] = json!("fresh");
        write_api(dir.path(), "fresh", &def);
        js_api(
            dir.path(),
            "mine",
            "/mine/",
            up,
            engine,
            &format!(
                "var _ = {{keys: function () {{ return 'mine'; }}}};\n{}",
                answering("return _.keys({});")
            ),
            Value::Null,
        );
        let gw = gateway(dir.path(), 1, 1);
        for _ in 0..3 {
            assert_eq!(get(gw.addr, "/fresh/").json(), json!(["a"]), "{engine}");
        }
        assert_eq!(get(gw.addr, "/mine/").text(), "mine", "{engine}");
        gw.stop();
    }
}
