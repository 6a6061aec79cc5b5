package uniquepolicy

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseNamesEachUniqueKeysPropertiesFromTheRoot(t *testing.T) {
	p, err := Parse(map[string]any{"uniqueKeys": []any{
		map[string]any{"paths": []any{"/email"}},
		map[string]any{"paths": []any{"/address/zipCode", `/"first name"`}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{{{"email"}}, {{"address", "zipCode"}, {"first name"}}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Parse = %v, want %v", p, want)
	}
	if p, err := Parse(nil); p != nil || err != nil {
		t.Errorf("Parse(nil) = %v, %v: an absent policy is none", p, err)
	}
}

func TestParseRefusesWhatTheServiceRefuses(t *testing.T) {
	for _, tc := range []struct {
		policy any
		want   string
	}{
		{map[string]any{"uniqueKeys": []any{map[string]any{"paths": []any{}}}}, "has no paths"},
		{map[string]any{"uniqueKeys": []any{map[string]any{"paths": []any{"/a/*"}}}}, `"/a/*" is invalid`},
		{map[string]any{"uniqueKeys": []any{map[string]any{"paths": []any{"/tags/[]"}}}}, "is invalid"},
		{map[string]any{"uniqueKeys": []any{map[string]any{"paths": []any{"a"}}}}, "is invalid"},
		{map[string]any{"uniqueKeys": []any{map[string]any{"paths": []any{"/a//b"}}}}, "is invalid"},
		{map[string]any{"uniqueKeys": []any{map[string]any{"paths": []any{"/a"}}, map[string]any{"paths": []any{"/a"}}}}, "more than once"},
		{map[string]any{"uniqueKeys": "x"}, "property is invalid"},
	} {
		if _, err := Parse(tc.policy); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want an error with %q", tc.policy, err, tc.want)
		}
	}
}
