// Our own implementation of the underscore 1.x functions Tyk scripts use
// (Tyk loads underscore into otto). Semantics follow underscore's
// documentation (underscorejs.org): collection functions take arrays,
// array-likes (a numeric `length`) and objects (their own enumerable keys);
// an iteratee may be a function (called with (value, key, list) and the
// optional context as `this`), a property name, an object to match, or
// nothing (identity). Evaluated once per context, on the first read of `_`;
// the completion value is the `_` object.
(function () {
    var _ = function (obj) { return obj; };
    _.VERSION = "1.13.6-tyk-plugin-bench";

    var hasOwn = Object.prototype.hasOwnProperty;
    var toString = Object.prototype.toString;
    var MAX_ARRAY_INDEX = Math.pow(2, 53) - 1;

    function isArrayLike(obj) {
        if (obj == null || typeof obj === "function") return false;
        var len = obj.length;
        return typeof len === "number" && len >= 0 && len <= MAX_ARRAY_INDEX;
    }

    _.identity = function (v) { return v; };
    _.noop = function () {};
    _.isArray = Array.isArray;
    _.isObject = function (obj) {
        var t = typeof obj;
        return t === "function" || (t === "object" && !!obj);
    };
    _.isFunction = function (obj) { return typeof obj === "function"; };
    _.isString = function (obj) { return toString.call(obj) === "[object String]"; };
    _.isNumber = function (obj) { return toString.call(obj) === "[object Number]"; };
    _.isBoolean = function (obj) {
        return obj === true || obj === false || toString.call(obj) === "[object Boolean]";
    };
    _.isNull = function (obj) { return obj === null; };
    _.isUndefined = function (obj) { return obj === void 0; };
    _.isNaN = function (obj) { return _.isNumber(obj) && isNaN(obj); };

    _.has = function (obj, path) {
        if (!_.isArray(path)) return obj != null && hasOwn.call(obj, path);
        for (var i = 0; i < path.length; i++) {
            if (obj == null || !hasOwn.call(obj, path[i])) return false;
            obj = obj[path[i]];
        }
        return !!path.length;
    };
    _.keys = function (obj) { return _.isObject(obj) ? Object.keys(obj) : []; };
    _.allKeys = function (obj) {
        if (!_.isObject(obj)) return [];
        var keys = [];
        for (var k in obj) keys.push(k);
        return keys;
    };
    _.values = function (obj) {
        var keys = _.keys(obj), out = new Array(keys.length);
        for (var i = 0; i < keys.length; i++) out[i] = obj[keys[i]];
        return out;
    };
    _.pairs = function (obj) {
        return _.map(_.keys(obj), function (k) { return [k, obj[k]]; });
    };
    _.size = function (obj) {
        if (obj == null) return 0;
        return isArrayLike(obj) ? obj.length : _.keys(obj).length;
    };

    _.property = function (path) {
        if (!_.isArray(path)) return function (obj) { return obj == null ? void 0 : obj[path]; };
        return function (obj) {
            for (var i = 0; i < path.length; i++) {
                if (obj == null) return void 0;
                obj = obj[path[i]];
            }
            return path.length ? obj : void 0;
        };
    };
    _.matcher = _.matches = function (attrs) {
        attrs = _.extendOwn({}, attrs);
        return function (obj) { return _.isMatch(obj, attrs); };
    };
    _.isMatch = function (object, attrs) {
        var keys = _.keys(attrs);
        if (object == null) return !keys.length;
        var obj = Object(object);
        for (var i = 0; i < keys.length; i++) {
            var k = keys[i];
            if (attrs[k] !== obj[k] || !(k in obj)) return false;
        }
        return true;
    };

    // The iteratee shorthands: function (bound to context), property
    // name or path, object to match, or identity.
    function cb(value, context) {
        if (value == null) return _.identity;
        if (typeof value === "function") {
            return context === void 0 ? value : function (a, b, c) { return value.call(context, a, b, c); };
        }
        if (_.isObject(value) && !_.isArray(value)) return _.matcher(value);
        return _.property(value);
    }
    _.iteratee = function (value, context) { return cb(value, context); };

    _.each = _.forEach = function (obj, iteratee, context) {
        if (obj == null) return obj;
        var f = context === void 0 ? iteratee : function (a, b, c) { return iteratee.call(context, a, b, c); };
        var i;
        if (isArrayLike(obj)) {
            for (i = 0; i < obj.length; i++) f(obj[i], i, obj);
        } else {
            var keys = _.keys(obj);
            for (i = 0; i < keys.length; i++) f(obj[keys[i]], keys[i], obj);
        }
        return obj;
    };

    // Calls f(value, key) for each element; stops when f returns true.
    function walk(obj, f) {
        if (obj == null) return;
        var i;
        if (isArrayLike(obj)) {
            for (i = 0; i < obj.length; i++) if (f(obj[i], i) === true) return;
        } else {
            var keys = _.keys(obj);
            for (i = 0; i < keys.length; i++) if (f(obj[keys[i]], keys[i]) === true) return;
        }
    }

    _.map = _.collect = function (obj, iteratee, context) {
        var f = cb(iteratee, context), out = [];
        walk(obj, function (v, k) { out.push(f(v, k, obj)); });
        return out;
    };
    _.filter = _.select = function (obj, predicate, context) {
        var f = cb(predicate, context), out = [];
        walk(obj, function (v, k) { if (f(v, k, obj)) out.push(v); });
        return out;
    };
    _.reject = function (obj, predicate, context) {
        var f = cb(predicate, context);
        return _.filter(obj, function (v, k, l) { return !f(v, k, l); });
    };
    _.find = _.detect = function (obj, predicate, context) {
        var f = cb(predicate, context), found;
        walk(obj, function (v, k) {
            if (f(v, k, obj)) { found = v; return true; }
        });
        return found;
    };
    _.findWhere = function (obj, attrs) { return _.find(obj, _.matcher(attrs)); };
    _.where = function (obj, attrs) { return _.filter(obj, _.matcher(attrs)); };
    _.every = _.all = function (obj, predicate, context) {
        var f = cb(predicate, context), ok = true;
        walk(obj, function (v, k) { if (!f(v, k, obj)) { ok = false; return true; } });
        return ok;
    };
    _.some = _.any = function (obj, predicate, context) {
        var f = cb(predicate, context), ok = false;
        walk(obj, function (v, k) { if (f(v, k, obj)) { ok = true; return true; } });
        return ok;
    };
    // Without an initial memo, the first element is the memo.
    _.reduce = _.foldl = _.inject = function (obj, iteratee, memo, context) {
        var f = context === void 0 ? iteratee : function (a, b, c, d) { return iteratee.call(context, a, b, c, d); };
        var initial = arguments.length >= 3;
        walk(obj, function (v, k) {
            if (!initial) { memo = v; initial = true; } else { memo = f(memo, v, k, obj); }
        });
        return memo;
    };
    _.reduceRight = _.foldr = function (obj, iteratee, memo, context) {
        var list = isArrayLike(obj) ? Array.prototype.slice.call(obj) : _.values(obj);
        list.reverse();
        return arguments.length >= 3 ? _.reduce(list, iteratee, memo, context) : _.reduce(list, iteratee);
    };
    _.pluck = function (obj, key) { return _.map(obj, _.property(key)); };
    _.toArray = function (obj) {
        if (!obj) return [];
        if (_.isArray(obj)) return obj.slice();
        if (_.isString(obj)) return obj.split("");
        return isArrayLike(obj) ? _.map(obj, _.identity) : _.values(obj);
    };

    // `_.contains` finds NaN too (underscore compares with its own indexOf).
    function indexOf(list, item, from) {
        var i = Math.max(from | 0, 0);
        if (item !== item) {
            for (; i < list.length; i++) if (list[i] !== list[i]) return i;
            return -1;
        }
        for (; i < list.length; i++) if (list[i] === item) return i;
        return -1;
    }
    _.indexOf = function (array, item, from) { return array == null ? -1 : indexOf(array, item, from); };
    _.contains = _.include = _.includes = function (obj, item, fromIndex) {
        if (!isArrayLike(obj)) obj = _.values(obj);
        if (typeof fromIndex !== "number") fromIndex = 0;
        return indexOf(obj, item, fromIndex) >= 0;
    };

    // Stable: ties keep their original order.
    _.sortBy = function (obj, iteratee, context) {
        var f = cb(iteratee, context), index = 0;
        var rows = _.map(obj, function (v, k, l) {
            return { value: v, index: index++, criteria: f(v, k, l) };
        });
        rows.sort(function (left, right) {
            var a = left.criteria, b = right.criteria;
            if (a !== b) {
                if (a > b || a === void 0) return 1;
                if (a < b || b === void 0) return -1;
            }
            return left.index - right.index;
        });
        return _.pluck(rows, "value");
    };
    function grouper(assign) {
        return function (obj, iteratee, context) {
            var f = cb(iteratee, context), out = {};
            walk(obj, function (v, k) { assign(out, v, f(v, k, obj)); });
            return out;
        };
    }
    _.groupBy = grouper(function (out, v, key) {
        if (_.has(out, key)) out[key].push(v); else out[key] = [v];
    });
    _.indexBy = grouper(function (out, v, key) { out[key] = v; });
    _.countBy = grouper(function (out, v, key) {
        if (_.has(out, key)) out[key]++; else out[key] = 1;
    });
    _.max = function (obj, iteratee, context) {
        var f = cb(iteratee, context), best = -Infinity, bestKey = -Infinity;
        walk(obj, function (v, k) {
            var c = f(v, k, obj);
            if (c > bestKey || (c === -Infinity && best === -Infinity)) { best = v; bestKey = c; }
        });
        return best;
    };
    _.min = function (obj, iteratee, context) {
        var f = cb(iteratee, context), best = Infinity, bestKey = Infinity;
        walk(obj, function (v, k) {
            var c = f(v, k, obj);
            if (c < bestKey || (c === Infinity && best === Infinity)) { best = v; bestKey = c; }
        });
        return best;
    };

    // Arrays.
    _.first = _.head = _.take = function (array, n) {
        if (array == null || array.length < 1) return n == null ? void 0 : [];
        if (n == null) return array[0];
        return Array.prototype.slice.call(array, 0, Math.max(0, n));
    };
    _.last = function (array, n) {
        if (array == null || array.length < 1) return n == null ? void 0 : [];
        if (n == null) return array[array.length - 1];
        return Array.prototype.slice.call(array, Math.max(0, array.length - n));
    };
    _.initial = function (array, n) {
        return Array.prototype.slice.call(array, 0, Math.max(0, array.length - (n == null ? 1 : n)));
    };
    _.rest = _.tail = _.drop = function (array, n) {
        return Array.prototype.slice.call(array, n == null ? 1 : n);
    };
    _.compact = function (array) { return _.filter(array, Boolean); };
    _.flatten = function (array, shallow) {
        var out = [];
        (function flat(list, depth) {
            for (var i = 0; i < list.length; i++) {
                var v = list[i];
                if ((_.isArray(v) || toString.call(v) === "[object Arguments]") && (!shallow || depth === 0)) {
                    flat(v, depth + 1);
                } else {
                    out.push(v);
                }
            }
        })(array || [], 0);
        return out;
    };
    // `isSorted` may be left out: `_.uniq(array, iteratee)`.
    _.uniq = _.unique = function (array, isSorted, iteratee, context) {
        if (typeof isSorted !== "boolean") {
            context = iteratee;
            iteratee = isSorted;
            isSorted = false;
        }
        var f = iteratee == null ? null : cb(iteratee, context);
        var out = [], seen = [], last;
        for (var i = 0; array != null && i < array.length; i++) {
            var v = array[i], c = f ? f(v, i, array) : v;
            if (isSorted && !f) {
                if (!i || last !== c) out.push(v);
                last = c;
            } else if (indexOf(seen, c) < 0) {
                seen.push(c);
                out.push(v);
            }
        }
        return out;
    };
    _.union = function () { return _.uniq(_.flatten(arguments, true)); };
    _.intersection = function (array) {
        var rest = Array.prototype.slice.call(arguments, 1);
        return _.filter(_.uniq(array), function (v) {
            return _.every(rest, function (other) { return _.contains(other, v); });
        });
    };
    _.difference = function (array) {
        var rest = _.flatten(Array.prototype.slice.call(arguments, 1), true);
        return _.filter(array, function (v) { return !_.contains(rest, v); });
    };
    _.without = function (array) {
        return _.difference(array, Array.prototype.slice.call(arguments, 1));
    };
    _.range = function (start, stop, step) {
        if (stop == null) { stop = start || 0; start = 0; }
        if (!step) step = stop < start ? -1 : 1;
        var n = Math.max(Math.ceil((stop - start) / step), 0), out = new Array(n);
        for (var i = 0; i < n; i++, start += step) out[i] = start;
        return out;
    };
    _.object = function (list, values) {
        var out = {};
        for (var i = 0; list != null && i < list.length; i++) {
            if (values) out[list[i]] = values[i]; else out[list[i][0]] = list[i][1];
        }
        return out;
    };

    // Objects.
    function assigner(keysOf, defaults) {
        return function (obj) {
            if (arguments.length < 2 || obj == null) return obj;
            obj = Object(obj);
            for (var a = 1; a < arguments.length; a++) {
                var src = arguments[a], keys = keysOf(src);
                for (var i = 0; i < keys.length; i++) {
                    var k = keys[i];
                    if (!defaults || obj[k] === void 0) obj[k] = src[k];
                }
            }
            return obj;
        };
    }
    _.extend = assigner(_.allKeys);
    _.extendOwn = _.assign = assigner(_.keys);
    _.defaults = assigner(_.allKeys, true);
    _.clone = function (obj) {
        if (!_.isObject(obj)) return obj;
        return _.isArray(obj) ? obj.slice() : _.extend({}, obj);
    };
    _.invert = function (obj) {
        var out = {}, keys = _.keys(obj);
        for (var i = 0; i < keys.length; i++) out[obj[keys[i]]] = keys[i];
        return out;
    };
    _.mapObject = function (obj, iteratee, context) {
        var f = cb(iteratee, context), out = {}, keys = _.keys(obj);
        for (var i = 0; i < keys.length; i++) out[keys[i]] = f(obj[keys[i]], keys[i], obj);
        return out;
    };
    // `_.pick(obj, 'a', ['b'])` takes the listed keys that are `in` the
    // object (inherited ones too), in the order listed;
    // `_.pick(obj, function (value, key, obj) {}, context)` the keys the
    // predicate accepts. `_.omit` is the complement.
    function listed(args) {
        return _.map(_.flatten(Array.prototype.slice.call(args, 1)), String);
    }
    function selectKeys(obj, pred) {
        var out = {}, all = _.allKeys(obj);
        for (var i = 0; i < all.length; i++) {
            if (pred(obj[all[i]], all[i], obj)) out[all[i]] = obj[all[i]];
        }
        return out;
    }
    _.pick = function (obj, spec, context) {
        if (obj == null) return {};
        var source = Object(obj);
        if (typeof spec === "function") return selectKeys(source, cb(spec, context));
        var out = {}, keys = listed(arguments);
        for (var i = 0; i < keys.length; i++) if (keys[i] in source) out[keys[i]] = source[keys[i]];
        return out;
    };
    _.omit = function (obj, spec, context) {
        if (obj == null) return {};
        var source = Object(obj), pred;
        if (typeof spec === "function") {
            var f = cb(spec, context);
            pred = function (v, k, o) { return !f(v, k, o); };
        } else {
            var keys = listed(arguments);
            pred = function (v, k) { return !_.contains(keys, k); };
        }
        return selectKeys(source, pred);
    };
    // Null, and array-likes (arrays, strings, arguments) of length 0, and
    // objects without own enumerable keys are empty; so are numbers and booleans.
    _.isEmpty = function (obj) {
        if (obj == null) return true;
        if (isArrayLike(obj) && (_.isArray(obj) || _.isString(obj) || toString.call(obj) === "[object Arguments]")) {
            return obj.length === 0;
        }
        return _.keys(obj).length === 0;
    };
    _.isEqual = function (a, b) { return eq(a, b, 0); };
    function eq(a, b, depth) {
        if (a === b) return a !== 0 || 1 / a === 1 / b;
        if (a == null || b == null) return false;
        if (a !== a) return b !== b;
        var ta = toString.call(a);
        if (ta !== toString.call(b)) return false;
        if (ta === "[object Number]") {
            var x = +a, y = +b;
            return x !== x ? y !== y : x === 0 ? 1 / x === 1 / y : x === y;
        }
        if (ta === "[object String]") return String(a) === String(b);
        if (ta === "[object Boolean]" || ta === "[object Date]") return +a === +b;
        if (typeof a !== "object" || typeof b !== "object" || depth > 100) return false;
        var ka = _.keys(a), kb = _.keys(b);
        if (ka.length !== kb.length) return false;
        for (var i = 0; i < ka.length; i++) {
            if (!_.has(b, ka[i]) || !eq(a[ka[i]], b[ka[i]], depth + 1)) return false;
        }
        return true;
    }

    // Utilities.
    _.times = function (n, iteratee, context) {
        var f = cb(iteratee, context), out = new Array(Math.max(0, n));
        for (var i = 0; i < n; i++) out[i] = f(i);
        return out;
    };
    _.now = Date.now;
    var idCounter = 0;
    _.uniqueId = function (prefix) { return (prefix == null ? "" : String(prefix)) + ++idCounter; };
    var escapes = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;", "`": "&#x60;" };
    _.escape = function (s) {
        return s == null ? "" : String(s).replace(/[&<>"'`]/g, function (c) { return escapes[c]; });
    };

    // `_.template("Hello <%= name %>")({name: "x"})`: `<%= %>` interpolates,
    // `<%- %>` interpolates HTML-escaped, `<% %>` runs code; `data` names
    // the template's argument (`variable` setting), else `obj` with `with`.
    _.templateSettings = {
        evaluate: /<%([\s\S]+?)%>/g,
        interpolate: /<%=([\s\S]+?)%>/g,
        escape: /<%-([\s\S]+?)%>/g
    };
    _.template = function (text, settings) {
        settings = _.defaults({}, settings, _.templateSettings);
        var matcher = new RegExp([
            (settings.escape || /(?!)/).source,
            (settings.interpolate || /(?!)/).source,
            (settings.evaluate || /(?!)/).source
        ].join("|") + "|$", "g");
        var index = 0, source = "__p+='";
        String(text).replace(matcher, function (match, esc, interp, evaluate, offset) {
            source += text.slice(index, offset).replace(/\\|'|\r|\n|\u2028|\u2029/g, function (c) {
                return "\\" + ({ "\\": "\\", "'": "'", "\r": "r", "\n": "n", "\u2028": "u2028", "\u2029": "u2029" })[c];
            });
            index = offset + match.length;
            if (esc) source += "'+\n((__t=(" + esc + "))==null?'':_.escape(__t))+\n'";
            else if (interp) source += "'+\n((__t=(" + interp + "))==null?'':__t)+\n'";
            else if (evaluate) source += "';\n" + evaluate + "\n__p+='";
            return match;
        });
        source += "';\n";
        var argument = settings.variable || "obj";
        if (!settings.variable) source = "with(obj||{}){\n" + source + "}\n";
        source = "var __t,__p='';\n" + source + "return __p;\n";
        var render = new Function(argument, "_", source);
        var template = function (data) { return render.call(this, data, _); };
        template.source = "function(" + argument + "){\n" + source + "}";
        return template;
    };

    _.chain = function (obj) {
        var wrapped = { _wrapped: obj };
        _.each(_.functions(_), function (name) {
            if (name === "chain" || name === "value") return;
            wrapped[name] = function () {
                var args = [wrapped._wrapped].concat(Array.prototype.slice.call(arguments));
                wrapped._wrapped = _[name].apply(_, args);
                return wrapped;
            };
        });
        wrapped.value = function () { return wrapped._wrapped; };
        return wrapped;
    };
    _.functions = _.methods = function (obj) {
        var names = [];
        for (var k in obj) if (typeof obj[k] === "function") names.push(k);
        return names.sort();
    };
    return _;
})();
