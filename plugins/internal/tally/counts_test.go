package tally

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "7": 7, "18446744073709551": 18446744073709551} {
		if got, err := Parse([]byte(in)); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1x", "12345678901234567890"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
	if got := string(AppendResult([]byte("v="), -5, 10, 3)); got != "v=-5,10,3" {
		t.Errorf("AppendResult = %q", got)
	}
}
