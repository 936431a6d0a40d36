package tables

import "testing"

func TestSimilarName(t *testing.T) {
	for _, tc := range []struct {
		source, field string
		want          bool
	}{
		{"user_id", "userId", true},
		{"user_id", "UserID", true},
		{"user_id", "user-id", true},
		{"payload.user_id", "userId", true},
		{"amount", "amout", true},
		{"amount", "amounts", true},
		{"timestamp", "timestmap", true},
		{"user_id", "user_id", false}, // the same field is not "similar": it would fill the column
		{"id", "ip", false},           // short names are too close to everything
		{"name", "game", false},
		{"user_id", "order_id", false},
		{"", "x", false},
	} {
		if got := SimilarName(tc.source, tc.field); got != tc.want {
			t.Errorf("SimilarName(%q, %q) = %v, want %v", tc.source, tc.field, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"abc", "abc", 0}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
