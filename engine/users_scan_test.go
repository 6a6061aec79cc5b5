package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// permissionByMap is how a stored permission was read before
// storedPermission: the record decoded into a map (storedProps), then
// permissionOf.
func permissionByMap(raw []byte) (*Permission, error) {
	var props map[string]any
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, err
	}
	return permissionOf(props, raw)
}

// TestAStoredPermissionReadsAsItsMapDecodeDoes holds storedPermission
// (the scan of a record's six properties) equal to the map decode and
// permissionOf, over records as the engine writes them, random ones and
// hostile ones: names differing in case only, names spelled with escapes,
// repeated names, the names inside nested values, values of other types,
// escapes and invalid UTF-8 in values, records that are not objects or not
// JSON.
func TestAStoredPermissionReadsAsItsMapDecodeDoes(t *testing.T) {
	check := func(raw []byte) {
		t.Helper()
		want, werr := permissionByMap(raw)
		got, gerr := storedPermission(raw)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("%q: error %v, the map decode's %v", raw, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", raw, got, want)
		}
	}
	fixed := []string{
		`{"id":"p","permissionMode":"Read","resource":"dbs/db/colls/c","_rid":"AAAAAA==AAAAAAAAAAAAAA==","_etag":"\"00000001-0000-0000-0000-000000000001\"","_ts":1700000000,"_self":"dbs/x/users/y/permissions/z/"}`,
		`{"id":"p","permissionMode":"all","resource":"/dbs/db/colls/c/docs/d/","resourcePartitionKey":["p"]}`,
		`{"permissionMode":"ALL","Resource":"dbs/other","resource":"dbs/db"}`,
		`{"resource":"dbs/db","Resource":"dbs/other"}`,
		`{"resource":"dbs/db","resource":"dbs/second"}`,
		`{"res\u006furce":"dbs/escaped","resource":"dbs/db"}`,
		`{"resource":"dbs/db","res\u006furce":"dbs/escaped"}`,
		`{"\u0069d":"escaped id"}`,
		`{"id":"a\"b\\c\/d\u00e9\ud83d\ude00"}`,
		"{\"id\":\"bad\xffutf8\",\"resource\":\"\xc3\"}",
		`{"id":1,"_rid":null,"_etag":true,"permissionMode":["All"],"resource":{"resource":"dbs/x"}}`,
		`{"x":{"id":"nested","resource":"dbs/nested"},"y":["resource","id"],"id":"top"}`,
		`{"resourcePartitionKey":null}`,
		`{"resourcePartitionKey":[1.0,1e2,-0,"a<b>&",true,null,{}]}`,
		`{"resourcePartitionKey":[[1]]}`,
		`{"resourcePartitionKey":"p"}`,
		`{"resourcePartitionKey":[]}`,
		`{"resourcePartitionKey":[1],"resourcePartitionKey":null}`,
		`{"permissionMode":"\u0041ll"}`,
		`{"permissionMode":"A\u006c\u006C"}`,
		"{\"permissionMode\":\"A\u212Al\"}",
		`{"permissionMode":"All "}`,
		`{"resource":"///"}`,
		`{"resource":"\/dbs\/db\/"}`,
		` 	{ "id" : "spaced" , "resource"	:	"dbs/db" } 
`,
		`{}`, `null`, `[]`, `"id"`, `1`, `true`, ``, ` `, `{`, `{"id":}`, `{"id":"p"} x`, `{"id":"p",}`,
		`{"id":"p"}{"id":"q"}`, `{"id" "p"}`, `{'id':'p'}`, "{\"id\":\"a\x01\"}",
		`{"":"empty name","id":""}`,
		`{"ID":"upper","Id":"mixed","id":"lower"}`,
		`{"_rid":"r","_RID":"R","_etag":"e","_ETAG":"E"}`,
		`{"permissionmode":"All","PermissionMode":"All"}`,
	}
	for _, s := range fixed {
		check([]byte(s))
	}

	names := []string{"id", "_rid", "_etag", "permissionMode", "resource", "resourcePartitionKey",
		"ID", "Id", "_RID", "Resource", "RESOURCE", "permissionmode", "PermissionMode", "resourcepartitionkey",
		`res\u006furce`, `\u0069d`, `_\u0072id`, "other", "_ts", "_self", "", "resource ", "idx", "ſd"}
	rng := rand.New(rand.NewPCG(25, 41))
	strs := []string{"", "All", "all", "ALL", "Read", "read", "dbs/db", "/dbs/db/colls/c/", "///", "p",
		`a\"b`, `\u0041ll`, `\/dbs\/db`, `\ud83d\ude00`, "é", "\xff", "\xc3", "A\u212Al", `\n\t`, "<&>"}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(10); {
		case k < 4:
			return `"` + strs[rng.IntN(len(strs))] + `"`
		case k == 4:
			return []string{"0", "-1", "1.5", "1e3", "-0", "12345678901234567890", "1.0"}[rng.IntN(7)]
		case k == 5:
			return []string{"true", "false", "null"}[rng.IntN(3)]
		case k == 6 && depth < 3:
			var b strings.Builder
			b.WriteString("[")
			for j := range rng.IntN(4) {
				if j > 0 {
					b.WriteString(",")
				}
				b.WriteString(value(depth + 1))
			}
			b.WriteString("]")
			return b.String()
		case k == 7 && depth < 3:
			return object(rng, names, value, depth+1)
		default:
			return `"` + strs[rng.IntN(len(strs))] + strs[rng.IntN(len(strs))] + `"`
		}
	}
	for range 20000 {
		raw := []byte(object(rng, names, value, 0))
		if rng.IntN(20) == 0 && len(raw) > 0 { // damage it
			i := rng.IntN(len(raw))
			switch rng.IntN(3) {
			case 0:
				raw = raw[:i]
			case 1:
				raw[i] = "{}[]\",: x\\"[rng.IntN(10)]
			default:
				raw = append(raw, "} ,x"[rng.IntN(4)])
			}
		}
		check(raw)
	}
}

// object draws a JSON object of names (repeats allowed) and values, with
// whitespace here and there.
func object(rng *rand.Rand, names []string, value func(int) string, depth int) string {
	ws := func() string { return []string{"", "", "", " ", "\n\t", "\r\n "}[rng.IntN(6)] }
	var b strings.Builder
	b.WriteString(ws() + "{")
	for j := range rng.IntN(8) {
		if j > 0 {
			b.WriteString(ws() + ",")
		}
		fmt.Fprintf(&b, `%s"%s"%s:%s%s`, ws(), names[rng.IntN(len(names))], ws(), ws(), value(depth))
	}
	b.WriteString(ws() + "}" + ws())
	return b.String()
}
