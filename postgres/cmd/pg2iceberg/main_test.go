package main

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestTableListTakesAllOrNames(t *testing.T) {
	cases := []struct {
		file, flag string
		want       []string
		fail       bool
	}{
		{file: `"all"`, want: nil},
		{file: `["public.a", "b"]`, want: []string{"public.a", "b"}},
		{file: `["x"]`, flag: "all", want: nil},
		{flag: "s.a,s.b", want: []string{"s.a", "s.b"}},
		{file: `"some"`, fail: true},
		{file: `3`, fail: true},
	}
	for _, c := range cases {
		got, err := tableList(json.RawMessage(c.file), c.flag)
		if (err != nil) != c.fail || !slices.Equal(got, c.want) {
			t.Errorf("tableList(%s, %q) = %v, %v; want %v (error: %v)", c.file, c.flag, got, err, c.want, c.fail)
		}
	}
}
