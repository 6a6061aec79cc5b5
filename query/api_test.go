package query

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestParseCondition(t *testing.T) {
	doc := []byte(`{"id":"1","status":"open","n":3,"tags":["a","b"],"o":{"x":null}}`)
	tests := []struct {
		cond   string
		params map[string]json.RawMessage
		want   bool
		err    string
	}{
		{cond: "FROM c WHERE c.status = 'open'", want: true},
		{cond: "FROM c WHERE c.total > 10000", want: false},
		{cond: "FROM c WHERE c.n >= 3", want: true},
		{cond: "from c where c.status = 'closed'", want: false},
		{cond: "FROM root WHERE root.n > 2", want: true},
		{cond: "FROM root r WHERE r.n > @min", params: map[string]json.RawMessage{"@min": json.RawMessage("5")}, want: false},
		{cond: "FROM c WHERE c.missing = 1", want: false},
		{cond: "FROM c WHERE c.n", want: false},
		{cond: "FROM c WHERE IS_NULL(c.o.x) AND ARRAY_CONTAINS(c.tags, 'b')", want: true},
		{cond: "FROM c JOIN t IN c.tags WHERE t = 'b'", want: true},
		{cond: "FROM c JOIN t IN c.tags WHERE t = 'z'", want: false},
		{cond: "FROM c", want: true},
		{cond: "SELECT * FROM c WHERE c.id = '1'", want: true},
		{cond: "FROM c WHER c.id = '1'", err: "Syntax error, incorrect syntax near 'c'."},
		{cond: "WHERE c.id = '1'", err: "Syntax error, incorrect syntax near 'WHERE'."},
		{cond: "FROM c WHERE x.id = '1'", err: "Identifier 'x' could not be resolved."},
	}
	for _, tt := range tests {
		t.Run(tt.cond, func(t *testing.T) {
			c, err := ParseCondition(tt.cond)
			if tt.err != "" {
				var qe *Error
				if !errors.As(err, &qe) || qe.Message != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Matches(doc, tt.params)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
	c, _ := ParseCondition("FROM c")
	if _, err := c.Matches([]byte("{"), nil); err == nil {
		t.Fatal("invalid document accepted")
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	_, err := Parse("SELECT * FORM c")
	var qe *Error
	if !errors.As(err, &qe) {
		t.Fatalf("error %v is not *Error", err)
	}
	if qe.Code != CodeSyntax || qe.Start != 9 || qe.End != 13 {
		t.Fatalf("got %+v, want code %s at 9..13", qe, CodeSyntax)
	}
	if want := "Syntax error, incorrect syntax near 'FORM'. (at offset 9-13)"; qe.Error() != want {
		t.Fatalf("Error() = %q, want %q", qe.Error(), want)
	}
	if _, err := Parse("SELECT VALUE '" + strings.Repeat("x", MaxQueryLength) + "'"); err == nil {
		t.Fatal("over-long query accepted")
	}
}

// udfs implements UDFResolver for tests.
type udfs map[string]func(args []json.RawMessage) (json.RawMessage, error)

func (u udfs) Call(name string, args []json.RawMessage) (json.RawMessage, error) {
	f, ok := u[name]
	if !ok {
		return nil, errors.New("no udf " + name)
	}
	return f(args)
}

func TestUDF(t *testing.T) {
	resolver := udfs{
		"tax": func(args []json.RawMessage) (json.RawMessage, error) {
			var n float64
			if err := json.Unmarshal(args[0], &n); err != nil {
				return nil, err
			}
			b, _ := json.Marshal(n * 1.5)
			return b, nil
		},
		"nothing": func([]json.RawMessage) (json.RawMessage, error) { return nil, nil },
		"argc": func(args []json.RawMessage) (json.RawMessage, error) {
			nilCount := 0
			for _, a := range args {
				if a == nil {
					nilCount++
				}
			}
			return json.RawMessage(`[` + itoa(len(args)) + `,` + itoa(nilCount) + `]`), nil
		},
	}
	docs := docsOf(`{"id":"a","price":10}`, `{"id":"b","price":4}`)
	tests := []struct {
		query string
		want  string
		err   string
	}{
		{query: "SELECT VALUE udf.tax(c.price) FROM c", want: `[15,6]`},
		{query: "SELECT c.id FROM c WHERE udf.tax(c.price) > 10", want: `[{"id":"a"}]`},
		{query: "SELECT VALUE udf.nothing() FROM c", want: `[]`},
		{query: "SELECT VALUE udf.argc(c.missing, 1) FROM c WHERE c.id = 'a'", want: `[[2,1]]`},
		{query: "SELECT VALUE udf.unknown(1) FROM c", err: "no udf unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := Parse(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			res, err := q.Execute(docs, Options{UDF: resolver})
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := joinRaw(res); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func joinRaw(res []json.RawMessage) string {
	parts := make([]string, len(res))
	for i, r := range res {
		parts[i] = string(r)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestRowsStreaming(t *testing.T) {
	q, err := Parse("SELECT c.id, t FROM c JOIN t IN c.tags WHERE t != 'x'")
	if err != nil {
		t.Fatal(err)
	}
	x, err := q.Prepare(Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ doc, want string }{
		{`{"id":"a","tags":["x","y","z"]}`, `[{"id":"a","t":"y"},{"id":"a","t":"z"}]`},
		{`{"id":"b"}`, `[]`},
		{`{"id":"c","tags":["x"]}`, `[]`},
	}
	for _, tt := range tests {
		rows, err := x.Rows([]byte(tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := joinRaw(rows); got != tt.want {
			t.Errorf("Rows(%s) = %s, want %s", tt.doc, got, tt.want)
		}
	}
	if _, err := x.Rows([]byte(`not json`)); err == nil {
		t.Error("invalid document accepted")
	}
	for _, text := range []string{"SELECT VALUE COUNT(1) FROM c", "SELECT * FROM c ORDER BY c.id", "SELECT DISTINCT c.a FROM c",
		"SELECT c.a FROM c GROUP BY c.a", "SELECT * FROM (SELECT VALUE c FROM c) x", "SELECT VALUE 1"} {
		q, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := q.Prepare(Options{})
		if _, err := x.Rows([]byte(`{}`)); !errors.Is(err, ErrNotStreaming) {
			t.Errorf("%s: Rows err = %v, want ErrNotStreaming", text, err)
		}
	}
}

func TestExecuteSourceError(t *testing.T) {
	boom := errors.New("disk on fire")
	docs := func(yield func([]byte, error) bool) {
		if !yield([]byte(`{"id":"a"}`), nil) {
			return
		}
		yield(nil, boom)
	}
	q, _ := Parse("SELECT * FROM c")
	if _, err := q.Execute(docs, Options{}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want source error", err)
	}
	q, _ = Parse("SELECT VALUE COUNT(1) FROM c")
	if _, err := q.Execute(docsOf(`{"a":1}`, `{`), Options{}); err == nil {
		t.Fatal("invalid document accepted")
	}
	if _, err := q.Execute(docsOf(), Options{Params: map[string]json.RawMessage{"@x": json.RawMessage(`nope`)}}); err == nil {
		t.Fatal("invalid parameter accepted")
	}
}

func TestExecuteStopsEarly(t *testing.T) {
	pulled := 0
	docs := func(yield func([]byte, error) bool) {
		for i := 0; i < 1000; i++ {
			pulled++
			if !yield([]byte(`{"n":1}`), nil) {
				return
			}
		}
	}
	q, _ := Parse("SELECT TOP 3 VALUE c.n FROM c")
	res, err := q.Execute(docs, Options{})
	if err != nil || len(res) != 3 {
		t.Fatalf("res=%v err=%v", res, err)
	}
	if pulled != 3 {
		t.Fatalf("pulled %d documents, want 3", pulled)
	}
}

func TestConcurrentExecution(t *testing.T) {
	q, err := Parse("SELECT c.id, c.name LIKE @p AS m FROM c WHERE c.name LIKE 'a%' ORDER BY c.id")
	if err != nil {
		t.Fatal(err)
	}
	docs := docsOf(`{"id":"2","name":"ab"}`, `{"id":"1","name":"ac"}`, `{"id":"3","name":"b"}`)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				res, err := q.Execute(docs, Options{Params: map[string]json.RawMessage{"@p": json.RawMessage(`"%b"`)}})
				if err != nil || joinRaw(res) != `[{"id":"1","m":false},{"id":"2","m":true}]` {
					t.Errorf("res=%s err=%v", joinRaw(res), err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestErrorJSON(t *testing.T) {
	_, err := Parse("SELECT * FORM c")
	var qe *Error
	if !errors.As(err, &qe) {
		t.Fatal(err)
	}
	want := `{"errors":[{"severity":"Error","location":{"start":9,"end":13},"code":"SC1001","message":"Syntax error, incorrect syntax near 'FORM'."}]}`
	if got := string(qe.JSON()); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var v any
	if err := json.Unmarshal(qe.JSON(), &v); err != nil {
		t.Fatal(err)
	}
}

func TestExecutionSharedAcrossGoroutines(t *testing.T) {
	q, err := Parse("SELECT VALUE CONCAT(c.a, UPPER(t)) FROM c JOIN t IN c.tags WHERE RegexMatch(t, '^[a-z]+$')")
	if err != nil {
		t.Fatal(err)
	}
	x, err := q.Prepare(Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"a":"p-","tags":["ab","C","de"]}`)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				rows, err := x.Rows(doc)
				if err != nil || joinRaw(rows) != `["p-AB","p-DE"]` {
					t.Errorf("rows=%s err=%v", joinRaw(rows), err)
					return
				}
				all, err := x.Execute(docsOf(string(doc), string(doc)))
				if err != nil || len(all) != 4 {
					t.Errorf("all=%s err=%v", joinRaw(all), err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
