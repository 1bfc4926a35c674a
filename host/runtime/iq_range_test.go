package runtime

import (
	"net/url"
	"reflect"
	"testing"
)

// TestParseRange: the limit defaults to defaultRangeLimit and must be a number from 1 to
// maxRangeLimit; an empty from or to leaves that end open.
func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  rangeQuery
		fails bool
	}{
		{query: "", want: rangeQuery{limit: defaultRangeLimit}},
		{query: "from=&to=", want: rangeQuery{limit: defaultRangeLimit}},
		{query: "from=a&to=b%3Fc&limit=1", want: rangeQuery{from: []byte("a"), to: []byte("b?c"), limit: 1}},
		{query: "limit=100000", want: rangeQuery{limit: maxRangeLimit}},
		{query: "limit=100001", fails: true},
		{query: "limit=0", fails: true},
		{query: "limit=ten", fails: true},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseRange(q)
		switch {
		case tc.fails && err == nil:
			t.Errorf("%q: %+v, want an error", tc.query, got)
		case !tc.fails && err != nil:
			t.Errorf("%q: %v", tc.query, err)
		case !tc.fails && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%q: %+v, want %+v", tc.query, got, tc.want)
		}
	}
}
