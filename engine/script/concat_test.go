package script

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestConcatenationKeepsTheOperatorSemantics compares each expression as
// rewritten (the script's own code) with the same expression run by indirect
// eval, which is compiled by goja itself and so uses the plain operators.
func TestConcatenationKeepsTheOperatorSemantics(t *testing.T) {
	exprs := []string{
		`1 + 2`, `1 + 2.5`, `0.1 + 0.2`, `2147483647 + 1`, `9007199254740991 + 2`, `-0 + -0`, `NaN + 1`, `1e308 + 1e308`,
		`"a" + 1`, `1 + "a"`, `"a" + 1.5`, `"a" + -0`, `"" + 1e21`, `"a" + "é"`, `"é" + 1`, `"" + ""`,
		`"a" + null`, `undefined + "b"`, `true + 1`, `null + null`, `true + "x"`, `undefined + 1`,
		`1n + 2n`, `"a" + 1n`, `1n + 1`, `"a" + Symbol("s")`, `Symbol() + 1`,
		`({valueOf: function () { return 5; }}) + 1`, `({toString: function () { return "t"; }}) + "x"`,
		`[1, 2] + [3]`, `({}) + ""`, `new Date(0) + ""`, `({[Symbol.toPrimitive]: function (h) { return h; }}) + ""`,
		`(function () { var log = []; function f(x) { log.push(x); return x; } return f("a") + f("b") + log.join(); })()`,
		`(function () { var s = "a"; s += "b"; s += 1; s += null; return s; })()`,
		`(function () { var n = 1; n += 2; n += 0.5; return n; })()`,
		`(function () { var o = {s: "a"}; o.s += "b"; o["s"] += 1; return o.s; })()`,
		`(function () { var o = {s: 1}; var r = (o.s += 2); return r + "/" + o.s; })()`,
		`(function () { var n = 0, o = {s: "a"}; function g() { n++; return o; } g().s += "b"; g()["s"] += "c"; return o.s + n; })()`,
		`(function () { var log = []; var o = {get s() { log.push("get"); return "a"; }, set s(v) { log.push("set " + v); }};
			function key() { log.push("key"); return "s"; } function val() { log.push("val"); return "b"; }
			(function () { return o; })()[key()] += val(); return log.join(); })()`,
		`(function () { var k = Symbol(), o = {}; o[k] = "a"; (function () { return o; })()[k] += "b"; return o[k]; })()`,
		`(function () { var a = [1, 2], i = 0; a[i++] += 10; a[i++] += "x"; return a.join() + i; })()`,
		`(function () { var o = "outer", k = {s: "a"}; (function () { return k; })().s += o; return k.s; })()`,
		`(function () { "use strict"; var o = Object.freeze({s: "a"}); try { (function () { return o; })().s += "b"; return "no error"; } catch (e) { return e.name; } })()`,
		`(function () { var o = Object.freeze({s: "a"}); (function () { return o; })().s += "b"; return o.s; })()`,
		`(function () { var u; try { u.s += "b"; } catch (e) { return e.name; } })()`,
		"`a${1}b${\"c\"}d${null}${undefined}${{toString: function () { return \"o\"; }}}`",
		"`${`${1 + 1}`}` + `x`", "`${Symbol()}`", "`plain`", "`${\"é\"}${2}`",
		"(function (s) { return s.raw.join(\"|\") + arguments.length; })`x${1}y`",
		`(function () { class A { #x = "a"; f() { this.#x += "b"; return this.#x; } } return new A().f(); })()`,
		`(function () { class B { get s() { return "p"; } } class C extends B { f() { return super.s + "q"; } } return new C().f(); })()`,
		`(function () { function* g() { var o = {s: "a"}; (function () { return o; })().s += yield 1; return o.s; } var it = g(); it.next(); return it.next("b").value; })()`,
		`(function () { var s = "ab"; return s.concat("c", 1) + String.raw({raw: ["x", "y"]}, s); })()`,
		`(function () { var a = 1, b = "x", c = 2.5; return [a + b, b + a, a + a, b + b, a + c, c + b].join("|"); })()`,
		`(function () { var o = {p: "q", n: 3}, n = 2; return [n + o.p, n + o.n, o.p + n, o.n + o.p].join("|"); })()`,
		`(function () { var s = "a"; s += -1; s += typeof s; s += 1 < 2; return s; })()`,
		`(function () { var x = {valueOf: function () { return 3; }}, y = 4; return [y + x, x + y, "" + x].join("|"); })()`,
		`(function () { try { return undeclaredVar + 1; } catch (e) { return e.name; } })()`,
		`(function () { try { return undeclaredVar + undeclaredToo; } catch (e) { return e.name; } })()`,
		`(function () { var n = 1; var m = n + n + n + "x" + n + n; return m; })()`,
		"(function () { var s = \"s\"; return `${s}` + `<${s}>` + `${s}${1}`; })()",
		`(function () { var o = {a: Math.pow(2, 53), b: 1, c: Math.pow(2, 62), d: -Math.pow(2, 63)}; return [o.a + o.b, o.c + o.c, o.d + o.d, o.a + o.a + o.b].join("|"); })()`,
		`(function () { var o = {a: 2147483647, b: 2147483647, m: -0}; return [o.a + o.b, o.m + o.m, 1 / (o.m + o.m)].join("|"); })()`,
		`(function () { var o = {a: 9007199254740992, b: 1, c: 4611686018427387904, d: 9007199254740993}; return [o.a + o.b, o.c + o.c, o.d + o.b, (o.a | 0) + o.b].join("|"); })()`,
		`(function () { var a = [9007199254740991, 2, 4611686018427387904]; return [a[0] + a[1], a[2] + a[2]].join("|"); })()`,
		`(function () { var s = "x".repeat(5000), t = "ab", n = 3, m = -0.5; return [(s + n).length, t + n, t + m, (s + m).slice(-6)].join("|"); })()`,
	}
	body := `function (exprs) {
		function describe(f) {
			var v;
			try { v = f(); } catch (e) { return "throws " + (e && e.name); }
			if (typeof v === "number" && Object.is(v, -0)) { return "number -0"; }
			if (typeof v === "symbol") { return "symbol"; }
			return typeof v + " " + String(v);
		}
		var out = [];
		exprs.forEach(function (src) {
			out.push([describe(function () { return (0, eval)("(" + src + ")"); }),
				describe(new Function("return (" + src + ");"))]);
		});
		getContext().getResponse().setBody(out);
	}`
	// The expressions are also compiled into the script itself, each as one
	// function, so that they are rewritten.
	var direct strings.Builder
	direct.WriteString("function () {\n")
	direct.WriteString("function describe(f) { var v; try { v = f(); } catch (e) { return \"throws \" + (e && e.name); }\n")
	direct.WriteString("if (typeof v === \"number\" && Object.is(v, -0)) { return \"number -0\"; }\n")
	direct.WriteString("if (typeof v === \"symbol\") { return \"symbol\"; }\nreturn typeof v + \" \" + String(v); }\n")
	direct.WriteString("getContext().getResponse().setBody([\n")
	for i, e := range exprs {
		if i > 0 {
			direct.WriteString(",\n")
		}
		direct.WriteString("describe(function () { return (" + e + "); })")
	}
	direct.WriteString("]);\n}")

	rn := NewRunner(Limits{})
	list, _ := json.Marshal(exprs)
	res, err := rn.Execute(context.Background(), Script{ID: "plain", Body: body}, args(string(list)), newFakeCollection(), ExecuteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var plain [][2]string
	if err := json.Unmarshal(res.Body, &plain); err != nil {
		t.Fatal(err)
	}
	res, err = rn.Execute(context.Background(), Script{ID: "rewritten", Body: direct.String()}, nil, newFakeCollection(), ExecuteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rewritten []string
	if err := json.Unmarshal(res.Body, &rewritten); err != nil {
		t.Fatal(err)
	}
	for i, e := range exprs {
		if plain[i][0] != plain[i][1] {
			t.Fatalf("%s: eval gives %q, the Function constructor %q", e, plain[i][0], plain[i][1])
		}
		if rewritten[i] != plain[i][0] {
			t.Errorf("%s:\nrewritten %q\nplain     %q", e, rewritten[i], plain[i][0])
		}
	}
}

func TestCompoundAssignmentWithAwait(t *testing.T) {
	body := `async function () {
		var o = {s: "a"};
		function get() { return o; }
		get().s += await Promise.resolve("b");
		o.s += await Promise.resolve("c");
		getContext().getResponse().setBody(o.s);
	}`
	res, err := NewRunner(Limits{}).Execute(context.Background(), Script{ID: "await", Body: body}, nil, newFakeCollection(), ExecuteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Body) != `"abc"` {
		t.Fatalf("got %s", res.Body)
	}
}

// TestStringGrowthStopsAtTheLimit grows strings geometrically by every
// means the guards cover; each run must end with the memory-limit error
// before a string of more than MaxMemory/2 characters is made, whatever the
// script catches.
func TestStringGrowthStopsAtTheLimit(t *testing.T) {
	const limit = 32 << 20
	rn := NewRunner(Limits{MaxMemory: limit, Timeout: 10 * time.Second})
	grow := func(step string) string {
		return `function () { var s = "0123456789abcdef", o = {s: s}, a = [o]; for (;;) { try { ` + step + ` } catch (e) {} } }`
	}
	tests := []struct{ name, body string }{
		{"plus", grow(`s = s + s;`)},
		{"plus with a number", grow(`s = s + s + 1;`)},
		{"compound", grow(`s += s;`)},
		{"compound on a property", grow(`o.s += o.s;`)},
		{"compound on a computed property", grow(`a[0].s += a[0].s;`)},
		{"template", grow("s = `${s}${s}`;")},
		{"an object converted", grow(`s = s + {toString: function () { return s; }};`)},
		{"concat", grow(`s = s.concat(s);`)},
		{"String.raw", grow(`s = String.raw({raw: [s, s]});`)},
		{"replace", grow(`s = s.replace(/$/, s);`)},
		{"replaceAll", grow(`s = s.replaceAll("0", "00");`)},
		{"encodeURIComponent", `function () { var s = "\u0800".repeat(1 << 20); for (;;) { try { s = encodeURIComponent(s); } catch (e) {} } }`},
		{"JSON.stringify", `function () { var s = '"'; for (;;) { s = JSON.stringify(s); } }`},
		{"toLocaleString", grow(`s = [s, s].toLocaleString();`)},
		{"strict mode", `function () { "use strict"; var s = "0123456789abcdef"; for (;;) { s = s + s; } }`},
		{"a class method", `function () { class G { grow(s) { return s + s; } } var g = new G(), s = "0123456789abcdef"; for (;;) { s = g.grow(s); } }`},
		{"an async function", `async function () { var s = "0123456789abcdef"; for (;;) { s = s + await s; } }`},
		{"a property in the middle", grow(`s = s + s.length + s;`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := executeUntilMemoryStop(t, rn, tc.body)
			if m.peak > 2*limit+peakSlack {
				t.Fatalf("the heap grew by %d MiB with a limit of %d MiB", m.peak>>20, limit>>20)
			}
		})
	}
}

// TestStringsUpToTheLimitAreFine builds strings just within the limit by the
// same means.
func TestStringsUpToTheLimitAreFine(t *testing.T) {
	rn := NewRunner(Limits{MaxMemory: 32 << 20})
	body := `function () {
		var s = "0123456789abcdef", o = {s: s};
		while (s.length < (1 << 20)) { s = s + s; o.s += o.s; }
		var t = ` + "`${s}${s}`" + `, u = s.concat(s), v = s.replace(/$/, s);
		getContext().getResponse().setBody([s.length, o.s.length, t.length, u.length, v.length]);
	}`
	res, err := rn.Execute(context.Background(), Script{ID: "within", Body: body}, nil, newFakeCollection(), ExecuteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[1048576,1048576,2097152,2097152,2097152]`; string(res.Body) != want {
		t.Fatalf("got %s, want %s", res.Body, want)
	}
}

// TestNativesAreOutOfReach checks that the natives leave no trace a script
// can see: they are no property of the global object, under their own names
// or those used to declare them, and an arrow function's body still has no
// arguments.
func TestNativesAreOutOfReach(t *testing.T) {
	body := `() => {
		var names = ["%add", "%template", "__orreryAdd", "__orreryTemplate"];
		getContext().getResponse().setBody([typeof arguments, this === globalThis].concat(names.map(function (n) {
			return typeof globalThis[n];
		})));
	}`
	res, err := NewRunner(Limits{}).Execute(context.Background(), Script{ID: "reach", Body: body}, nil, newFakeCollection(), ExecuteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `["undefined",true,"undefined","undefined","undefined","undefined"]`; string(res.Body) != want {
		t.Fatalf("got %s, want %s", res.Body, want)
	}
}

// TestLongConcatenationsKeepEveryCharacter joins strings longer than one
// copy's chunk, of one-byte characters and of others, with operands that
// end mid-chunk, and checks every character of the results against the
// same joins built from short parts.
func TestLongConcatenationsKeepEveryCharacter(t *testing.T) {
	rn := NewRunner(Limits{MaxMemory: 64 << 20, Timeout: time.Minute})
	body := `function () {
		function make(n, alphabet) {
			var s = alphabet.repeat(Math.ceil(n / alphabet.length));
			return s.slice(0, n);
		}
		function same(x, y) {
			if (x.length !== y.length) return false;
			for (var i = 0; i < x.length; i += 997) if (x.charCodeAt(i) !== y.charCodeAt(i)) return false;
			return x.slice(-5000) === y.slice(-5000) && x.slice(0, 5000) === y.slice(0, 5000);
		}
		var out = [];
		[[300001, "abcdefg"], [700003, "xyz0123456789"], [300001, "aé€😀b"]].forEach(function (c) {
			var a = make(c[0], c[1]), b = make(c[0] + 12345, c[1].split("").reverse().join(""));
			var joined = a + b, expected = [a, b].join(""), templated = ` + "`<${a}|${b}>`" + `;
			out.push(joined.length, same(joined, expected), joined.slice(c[0] - 3, c[0] + 3) === expected.slice(c[0] - 3, c[0] + 3),
				same(templated, ["<", a, "|", b, ">"].join("")));
		});
		getContext().getResponse().setBody(out);
	}`
	res, err := rn.Execute(context.Background(), Script{ID: "long", Body: body}, nil, newFakeCollection(), ExecuteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[612347,true,true,true,1412351,true,true,true,612347,true,true,true]`; string(res.Body) != want {
		t.Fatalf("got %s, want %s", res.Body, want)
	}
}
