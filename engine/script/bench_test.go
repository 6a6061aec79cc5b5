package script

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

const trivialSproc = `function () { getContext().getResponse().setBody({ok: true}); }`

// benchExecute runs a stored procedure b.N times on one runner: a pooled
// runtime, its program cached.
func benchExecute(b *testing.B, sp Script, args []json.RawMessage) {
	rn := NewRunner(Limits{})
	coll := newFakeCollection()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rn.Execute(ctx, sp, args, coll, ExecuteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecuteTrivial is a stored procedure that only sets its response,
// on a pooled runtime with its program cached.
func BenchmarkExecuteTrivial(b *testing.B) {
	benchExecute(b, Script{ID: "trivial", Body: trivialSproc, ETag: "1"}, nil)
}

// BenchmarkExecuteAddOrder is seed 001's addOrder: one create and its callback.
func BenchmarkExecuteAddOrder(b *testing.B) {
	benchExecute(b, Script{ID: "addOrder", Body: addOrderJS, ETag: "1"},
		[]json.RawMessage{json.RawMessage(`{"customerId":"c1","total":30.5}`)})
}

// BenchmarkCallUDF is seed 001's tax function called with one number.
func BenchmarkCallUDF(b *testing.B) {
	rn := NewRunner(Limits{})
	udf := Script{ID: "tax", Body: taxJS, ETag: "1"}
	ctx := context.Background()
	args := []json.RawMessage{json.RawMessage(`30.5`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rn.CallUDF(ctx, udf, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewRuntime is the cost of a runtime that is not pooled: make it,
// install the API and freeze the built-ins. A run without the pool pays it
// on top of BenchmarkExecuteTrivial.
func BenchmarkNewRuntime(b *testing.B) {
	l := Limits{}.withDefaults()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := newVM(l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUDFSessionCall is one call of the tax UDF in a session, as a
// query calls it once per row.
func BenchmarkUDFSessionCall(b *testing.B) {
	// One session lasts the whole benchmark, which may exceed the default
	// budget.
	rn := NewRunner(Limits{Timeout: time.Hour})
	s, err := rn.NewUDFSession(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	udf := Script{ID: "tax", Body: taxJS, ETag: "1"}
	args := []json.RawMessage{json.RawMessage(`30.5`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Call(udf, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecuteArithmeticLoop is a stored procedure that spends its time
// on + (numbers and short strings), which runs through the concatenation
// natives (see rewrite.go).
func BenchmarkExecuteArithmeticLoop(b *testing.B) {
	benchExecute(b, Script{ID: "loop", Body: `function () {
		var n = 0, s = "";
		for (var i = 0; i < 1000; i++) { n = n + i * 2; n += 1; s = "k" + (i % 10); }
		getContext().getResponse().setBody([n, s]);
	}`, ETag: "1"}, nil)
}

// BenchmarkExecuteStringLoop is a stored procedure that spends its time on
// + of strings held in variables, each a call of the concatenation native.
func BenchmarkExecuteStringLoop(b *testing.B) {
	benchExecute(b, Script{ID: "strings", Body: `function () {
		var a = "key-", s, t = 0;
		for (var i = 0; i < 1000; i++) { s = a + i; s = s + a; t += s.length; }
		getContext().getResponse().setBody(t);
	}`, ETag: "1"}, nil)
}
