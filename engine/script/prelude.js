// The server-side API of one runtime, run once when the runtime is made.
//
// It installs getContext, __, console, ErrorCodes and the Error constructor on
// the global object, removes what a script must not have, and then freezes
// every object reachable from the global object, so that nothing a script
// does to the built-ins can be seen by the next script run on this runtime.
// All per-run state lives on the Go side and is reached through host.
(function (host) {
    'use strict';

    var NativeError = Error;
    var jsonParse = JSON.parse;
    var jsonStringify = JSON.stringify;
    var isArray = Array.isArray;
    var defineProperty = Object.defineProperty;
    var getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
    var global = globalThis;

    // Error(message) or Error(number, message): the second form sets
    // err.number, which the wrapper API and scripts compare with ErrorCodes.
    var ScriptError = function Error(a, b) {
        var e;
        if (arguments.length > 1 && typeof a === 'number') {
            e = new NativeError(b);
            e.number = a;
        } else if (arguments.length === 0) {
            e = new NativeError();
        } else {
            e = new NativeError(a);
        }
        if (new.target !== undefined && new.target !== ScriptError) {
            Object.setPrototypeOf(e, new.target.prototype);
        }
        return e;
    };
    ScriptError.prototype = NativeError.prototype;
    defineProperty(NativeError.prototype, 'constructor', { value: ScriptError, writable: true, enumerable: false, configurable: true });

    // statusError builds the error object a callback receives.
    function statusError(status, message) {
        var e = new NativeError(message);
        e.number = status;
        e.body = message;
        return e;
    }

    var ErrorCodes = {
        BadRequest: 400,
        Forbidden: 403,
        NotFound: 404,
        Conflict: 409,
        PreconditionFailed: 412,
        RequestEntityTooLarge: 413,
        RetryWith: 449,
        InternalServerError: 500
    };

    function fail(status, message) {
        throw statusError(status, message);
    }

    // splitOptions sorts out the optional (options, callback) pair.
    function callbackOf(options, callback) {
        if (typeof options === 'function') {
            return options;
        }
        if (callback !== undefined && callback !== null && typeof callback !== 'function') {
            fail(400, 'The callback must be a function.');
        }
        return callback;
    }
    function optionsOf(options) {
        if (options === undefined || options === null || typeof options === 'function') {
            return {};
        }
        if (typeof options !== 'object') {
            fail(400, 'The options must be an object.');
        }
        return options;
    }

    // documentText turns a document argument (object or JSON text) into JSON
    // text, giving it a generated id unless that is disabled.
    function documentText(body, options) {
        if (typeof body === 'string') {
            try {
                body = jsonParse(body);
            } catch (e) {
                fail(400, 'The document is not valid JSON: ' + e.message);
            }
        }
        if (body === null || typeof body !== 'object' || isArray(body)) {
            fail(400, 'The document must be a JSON object.');
        }
        if (body.id === undefined && !options.disableAutomaticIdGeneration) {
            body.id = host.guid();
        }
        return jsonStringify(body);
    }

    function writeOptions(options) {
        return { etag: options.etag, ifNoneMatch: options.ifNoneMatch, indexAction: options.indexAction };
    }
    function feedOptions(options) {
        return { pageSize: options.pageSize, continuation: options.continuation };
    }

    var Collection = {
        getSelfLink: function () { return host.selfLink(); },
        getAltLink: function () { return host.altLink(); },
        readDocument: function (link, options, callback) {
            var cb = callbackOf(options, callback);
            return host.submit('read', link, undefined, writeOptions(optionsOf(options)), cb);
        },
        readDocuments: function (link, options, callback) {
            var cb = callbackOf(options, callback);
            return host.submit('readFeed', link, undefined, feedOptions(optionsOf(options)), cb);
        },
        queryDocuments: function (link, query, options, callback) {
            var cb = callbackOf(options, callback);
            var o = optionsOf(options);
            var text, parameters;
            if (typeof query === 'string') {
                text = query;
                parameters = o.parameters;
            } else if (query !== null && typeof query === 'object' && typeof query.query === 'string') {
                text = query.query;
                parameters = query.parameters !== undefined ? query.parameters : o.parameters;
            } else {
                fail(400, 'The query must be a string or an object {query, parameters}.');
            }
            if (parameters !== undefined && parameters !== null && !isArray(parameters)) {
                fail(400, 'The query parameters must be an array of {name, value}.');
            }
            var fo = feedOptions(o);
            fo.parameters = parameters ? jsonStringify(parameters) : undefined;
            return host.submit('query', link, text, fo, cb);
        },
        createDocument: function (link, body, options, callback) {
            var cb = callbackOf(options, callback);
            var o = optionsOf(options);
            return host.submit('create', link, documentText(body, o), writeOptions(o), cb);
        },
        upsertDocument: function (link, body, options, callback) {
            var cb = callbackOf(options, callback);
            var o = optionsOf(options);
            return host.submit('upsert', link, documentText(body, o), writeOptions(o), cb);
        },
        replaceDocument: function (link, body, options, callback) {
            var cb = callbackOf(options, callback);
            var o = optionsOf(options);
            o = { etag: o.etag, indexAction: o.indexAction, disableAutomaticIdGeneration: true };
            return host.submit('replace', link, documentText(body, o), writeOptions(o), cb);
        },
        patchDocument: function (link, spec, options, callback) {
            var cb = callbackOf(options, callback);
            if (spec === null || typeof spec !== 'object') {
                fail(400, 'The patch specification must be an array of operations or an object {operations, condition}.');
            }
            return host.submit('patch', link, jsonStringify(spec), writeOptions(optionsOf(options)), cb);
        },
        deleteDocument: function (link, options, callback) {
            var cb = callbackOf(options, callback);
            return host.submit('delete', link, undefined, writeOptions(optionsOf(options)), cb);
        }
    };

    // The query API (__ and chain): each pipeline reads the partition's
    // documents once, asynchronously, and applies its steps in order.
    function keyCompare(a, b) {
        if (a === b) { return 0; }
        if (a === undefined) { return -1; }
        if (b === undefined) { return 1; }
        return a < b ? -1 : (a > b ? 1 : 0);
    }
    function deepFlatten(value, out) {
        for (var i = 0; i < value.length; i++) {
            if (isArray(value[i])) {
                deepFlatten(value[i], out);
            } else {
                out.push(value[i]);
            }
        }
    }
    function applyStep(step, docs) {
        var f = step.fn, out, i;
        switch (step.kind) {
        case 'filter':
            return docs.filter(function (d) { return f(d); });
        case 'map':
            return docs.map(function (d) { return f(d); });
        case 'pluck':
            return docs.map(function (d) { return d === null || d === undefined ? undefined : d[f]; });
        case 'sortBy':
        case 'sortByDescending':
            var keyed = docs.map(function (d, n) { return { k: f === undefined ? d : f(d), d: d, n: n }; });
            var sign = step.kind === 'sortBy' ? 1 : -1;
            keyed.sort(function (x, y) { return sign * keyCompare(x.k, y.k) || x.n - y.n; });
            return keyed.map(function (x) { return x.d; });
        case 'flatten':
            out = [];
            for (i = 0; i < docs.length; i++) {
                if (!isArray(docs[i])) {
                    out.push(docs[i]);
                } else if (f) {
                    out.push.apply(out, docs[i]);
                } else {
                    deepFlatten(docs[i], out);
                }
            }
            return out;
        case 'unwind':
            out = [];
            for (i = 0; i < docs.length; i++) {
                var inner = f(docs[i]);
                if (!isArray(inner)) { continue; }
                for (var j = 0; j < inner.length; j++) {
                    out.push(step.result ? step.result(docs[i], inner[j]) : [docs[i], inner[j]]);
                }
            }
            return out;
        }
        fail(500, 'Unknown query step ' + step.kind + '.');
    }
    function checkFunction(fn, what) {
        if (typeof fn !== 'function') {
            fail(400, 'The ' + what + ' must be a function.');
        }
    }
    function makeStep(kind, a, b) {
        switch (kind) {
        case 'filter':
        case 'map':
            checkFunction(a, kind === 'filter' ? 'predicate' : 'transformation');
            return { kind: kind, fn: a };
        case 'pluck':
            if (typeof a !== 'string' && typeof a !== 'number') {
                fail(400, 'The property name to pluck must be a string.');
            }
            return { kind: kind, fn: a };
        case 'sortBy':
        case 'sortByDescending':
            if (a !== undefined) { checkFunction(a, 'sort key selector'); }
            return { kind: kind, fn: a };
        case 'flatten':
            return { kind: kind, fn: !!a };
        case 'unwind':
            checkFunction(a, 'collection selector');
            if (b !== undefined && b !== null) { checkFunction(b, 'result selector'); }
            return { kind: kind, fn: a, result: b || undefined };
        }
    }
    // stepArity is how many leading arguments a step takes before options/callback.
    var stepArity = { filter: 1, map: 1, pluck: 1, sortBy: 1, sortByDescending: 1, flatten: 1, unwind: 2 };

    function runPipeline(steps, options, callback) {
        var cb = callbackOf(options, callback);
        optionsOf(options);
        var accepted = host.readAll(function (err, docs) {
            if (err) {
                if (cb) { return cb(err, undefined, {}); }
                throw err;
            }
            for (var i = 0; i < steps.length; i++) {
                docs = applyStep(steps[i], docs);
            }
            if (cb) {
                return cb(undefined, docs, { continuation: undefined });
            }
            appendResults(docs);
        });
        return { isAccepted: accepted };
    }

    function appendResults(docs) {
        var current = host.getBody('response');
        host.setBody('response', isArray(current) ? current.concat(docs) : docs);
    }

    var Chain = {
        value: function (options, callback) {
            return runPipeline(this.steps, options, callback);
        }
    };
    var Query = {};
    Object.keys(stepArity).forEach(function (kind) {
        var n = stepArity[kind];
        Query[kind] = function (a, b, c, d) {
            var step = makeStep(kind, a, n > 1 ? b : undefined);
            return n > 1 ? runPipeline([step], c, d) : runPipeline([step], b, c);
        };
        Chain[kind] = function (a, b) {
            this.steps.push(makeStep(kind, a, n > 1 ? b : undefined));
            return this;
        };
    });
    Query.chain = function () {
        var c = Object.create(Chain);
        defineProperty(c, 'steps', { value: [] });
        return c;
    };
    Object.keys(Query).forEach(function (k) { Collection[k] = Query[k]; });

    var Request = {
        getBody: function () { return host.getBody('request'); },
        setBody: function (v) { host.setBody('request', v); },
        getValue: function (name) { return host.getValue('request', name); },
        setValue: function (name, v) { host.setValue('request', name, v); },
        getOperationType: function () { return host.getValue('request', 'operationType'); }
    };
    var Response = {
        getBody: function () { return host.getBody('response'); },
        setBody: function (v) { host.setBody('response', v); },
        appendBody: function (v) { host.appendBody(v); },
        appendValue: function (name, v) {
            if (name === 'Body') { host.appendBody(v); return; }
            host.setValue('response', name, String(host.getValue('response', name)) + v);
        },
        getValue: function (name) { return host.getValue('response', name); },
        setValue: function (name, v) { host.setValue('response', name, v); }
    };
    var Context = {
        getCollection: function () { host.need('collection'); return Collection; },
        getRequest: function () { host.need('request'); return Request; },
        getResponse: function () { host.need('response'); return Response; },
        abort: function (err) {
            throw err !== undefined ? err : statusError(400, 'The script aborted.');
        }
    };
    var Underscore = Object.create(Collection);
    Underscore.request = Request;
    Underscore.response = Response;

    function formatLog(args) {
        var format = args[0];
        var rest = 1;
        var text;
        if (typeof format === 'string') {
            text = format.replace(/%[sdi%]/g, function (m) {
                if (m === '%%') { return '%'; }
                if (rest >= args.length) { return m; }
                var v = args[rest++];
                return m === '%s' ? String(v) : String(parseInt(v, 10));
            });
        } else {
            text = String(format);
        }
        for (; rest < args.length; rest++) {
            text += ' ' + String(args[rest]);
        }
        return text;
    }
    var console = {
        log: function () {
            if (host.logging()) {
                host.log(formatLog(Array.prototype.slice.call(arguments)));
            }
        }
    };

    // What a script must not reach: binary buffers (allocated whole by native
    // code, out of reach of the memory checks) and goja's own error type.
    ['ArrayBuffer', 'SharedArrayBuffer', 'DataView', 'Int8Array', 'Uint8Array',
        'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
        'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'GoError'
    ].forEach(function (name) { delete global[name]; });

    function constant(name, value) {
        defineProperty(global, name, { value: value, writable: false, enumerable: false, configurable: false });
    }
    constant('getContext', function getContext() { host.need('context'); return Context; });
    constant('ErrorCodes', ErrorCodes);
    constant('console', console);
    defineProperty(global, 'Error', { value: ScriptError, writable: true, enumerable: false, configurable: true });
    defineProperty(global, '__', {
        get: function () { host.need('collection'); return Underscore; },
        enumerable: false, configurable: false
    });
    // eval stays usable (also as direct eval), but a runtime that handed it out
    // may hold global bindings made by indirect eval, so it is not reused.
    var realEval = global.eval;
    defineProperty(global, 'eval', {
        get: function () { host.taint(); return realEval; },
        enumerable: false, configurable: false
    });

    // Taming: properties a script commonly assigns on its own objects (a
    // custom error's name, a class's toString) stay assignable on objects that
    // inherit them, although the built-in itself is frozen.
    function tame(obj, name) {
        var d = getOwnPropertyDescriptor(obj, name);
        if (!d || !('value' in d)) { return; }
        var value = d.value;
        defineProperty(obj, name, {
            get: function () { return value; },
            set: function (v) {
                if (this === obj) {
                    throw new TypeError('Cannot assign to read only property \'' + String(name) + '\' of a built-in object');
                }
                defineProperty(this, name, { value: v, writable: true, enumerable: true, configurable: true });
            },
            enumerable: d.enumerable,
            configurable: false
        });
    }
    ['constructor', 'toString', 'toLocaleString', 'valueOf', 'hasOwnProperty',
        'isPrototypeOf', 'propertyIsEnumerable'].forEach(function (n) { tame(Object.prototype, n); });
    ['constructor', 'toString', 'name'].forEach(function (n) { tame(Function.prototype, n); });
    ['constructor', 'toString', 'name', 'message'].forEach(function (n) { tame(NativeError.prototype, n); });
    [TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError].forEach(function (E) {
        ['constructor', 'name', 'message'].forEach(function (n) { tame(E.prototype, n); });
    });
    ['constructor', 'toString'].forEach(function (n) { tame(Array.prototype, n); });

    // Freeze everything reachable from the global object and from the
    // intrinsics that have no global name.
    var roots = [global, Context, Collection, Underscore, Request, Response, Chain, Query, ErrorCodes, console,
        Object.getPrototypeOf(function* () { }),
        Object.getPrototypeOf(async function () { }),
        Object.getPrototypeOf([][Symbol.iterator]()),
        Object.getPrototypeOf(''[Symbol.iterator]()),
        Object.getPrototypeOf(new Map()[Symbol.iterator]()),
        Object.getPrototypeOf(new Set()[Symbol.iterator]()),
        Object.getPrototypeOf(/a/[Symbol.matchAll]('a')),
        Object.getPrototypeOf((function () { return arguments; })())
    ];
    var seen = new Set();
    var stack = roots.slice();
    while (stack.length > 0) {
        var o = stack.pop();
        if (o === null || (typeof o !== 'object' && typeof o !== 'function') || seen.has(o)) {
            continue;
        }
        seen.add(o);
        var keys = Reflect.ownKeys(o);
        for (var i = 0; i < keys.length; i++) {
            var d = getOwnPropertyDescriptor(o, keys[i]);
            if (d === undefined) { continue; }
            if ('value' in d) {
                stack.push(d.value);
            } else {
                stack.push(d.get, d.set);
            }
        }
        stack.push(Object.getPrototypeOf(o));
    }
    seen.forEach(function (x) { Object.freeze(x); });

    // describe reports an exception that escaped the script as
    // [number or 0, text], never throwing itself.
    function describe(e) {
        var number = 0, text;
        try {
            if (e !== null && typeof e === 'object' && typeof e.number === 'number') {
                number = e.number;
            }
            text = String(e);
        } catch (x) {
            text = 'an exception that cannot be converted to a string';
        }
        return [number, text];
    }

    return {
        describe: describe,
        statusError: statusError,
        parse: jsonParse,
        stringify: jsonStringify
    };
})
