package kubewasm

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// stdParse is what encoding/json reads with UseNumber: the reference.
func stdParse(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errNotAnObject
	}
	// Trailing garbage that is not another value.
	rest, _ := readRest(dec)
	if strings.TrimSpace(rest) != "" {
		return nil, errNotAnObject
	}
	return v, nil
}

func readRest(dec *json.Decoder) (string, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(dec.Buffered())
	return b.String(), err
}

var jsonCorpus = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e10`, `-12.25E-3`, `1e+2`, `123456789012345678901234567890`,
	`"plain"`, `"esc \" \\ \/ \b \f \n \r \t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"lone \ud800 surrogate"`, `"\ud83d\u0041"`,
	`"héllo wörld 中文 🙂"`, "\"bad utf8 \xff\xfe here\"", `  {"a" : [1, 2, {"b": null}], "c": {"d": "e"}}  `,
	`{"a": 1, "a": 2}`, `{"metadata": {"name": "x", "labels": {"app": "web"}}, "spec": {"replicas": 3, "list": [true, false, null, 0.5]}}`,
	// Invalid.
	``, `{`, `[1,]`, `{"a":}`, `{"a" 1}`, `01`, `1.`, `.5`, `-`, `1e`, `"unterminated`, `"ctl ` + "\x01" + `"`, `tru`, `nul`, `{"a":1}x`, `[1] [2]`, `"\x"`, `"\u12"`, `{a:1}`,
}

func TestJSONReadsWhatEncodingJSONReads(t *testing.T) {
	for _, text := range jsonCorpus {
		want, wantErr := stdParse(text)
		got, err := parseJSON(text)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%q: error %v, encoding/json %v", text, err, wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %#v, encoding/json %#v", text, got, want)
		}
	}
}

func TestJSONWritesWhatEncodingJSONWrites(t *testing.T) {
	yes := true
	values := []any{
		nil, "", "a\"b\\c\n\t\r\x01\x1f", "héllo \u2028 \u2029 🙂", "bad \xff utf8", true, false, 0, -12, int64(math.MaxInt64), int32(-5), uint64(math.MaxUint64),
		0.0, 1.5, -2.25, 1e21, 1e-7, 123456.789, 1e20, json.Number("42"), json.Number("-1.5e3"),
		map[string]any{"z": 1, "a": []any{1, "x", nil, map[string]any{}}, "m": map[string]string{"b": "1", "a": "2"}},
		Object{"apiVersion": "v1", "metadata": map[string]any{"ownerReferences": []any{OwnerReference{APIVersion: "v1", Kind: "Foo", Name: "n", UID: "u", Controller: &yes}}}},
		OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web \"x\"", UID: "u", Controller: &yes, BlockOwnerDeletion: &yes},
		&OwnerReference{APIVersion: "v1", Kind: "Foo"}, (*OwnerReference)(nil),
		[]string{"a", "b"}, []any{}, map[string]any{}, struct {
			A int `json:"a"`
		}{3},
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshal(v)
		if err != nil {
			t.Errorf("%#v: %v", v, err)
			continue
		}
		// The same document; byte for byte, too, except for encoding/json's HTML escaping
		// (none here) and its U+FFFD spelled as the character rather than \ufffd.
		gotDoc, _ := stdParse(string(got))
		wantDoc, _ := stdParse(string(want))
		if !reflect.DeepEqual(gotDoc, wantDoc) {
			t.Errorf("%#v:\n got %s\nwant %s", v, got, want)
		}
		if !strings.Contains(string(want), "\ufffd") && string(got) != string(want) {
			t.Errorf("%#v: bytes differ:\n got %s\nwant %s", v, got, want)
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), json.Number("1x"), map[string]any{"f": func() {}}} {
		if _, err := marshal(bad); err == nil {
			t.Errorf("%#v: no error", bad)
		}
	}
}

func TestJSONRoundTripsKubernetesObjects(t *testing.T) {
	obj := mustParse(t, foo)
	text, err := marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseObject(text)
	if err != nil || !reflect.DeepEqual(obj, again) {
		t.Errorf("%s: %v", text, err)
	}
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if _, err := parseJSON(deep); err == nil {
		t.Error("nesting beyond the limit is refused")
	}
}

func FuzzJSON(f *testing.F) {
	for _, text := range jsonCorpus {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		want, wantErr := stdParse(text)
		got, err := parseJSON(text)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, encoding/json %v", text, err, wantErr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v, encoding/json %#v", text, got, want)
		}
		out, err := marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseJSON(string(out))
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("%q: round trip %s: %v", text, out, err)
		}
	})
}
