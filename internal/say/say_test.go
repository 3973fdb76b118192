package say

import "testing"

func TestNameAndUnder(t *testing.T) {
	t.Parallel()
	names := map[string]string{"Consumer.Plan.Deadline": "--deadline", "DB": "--db"}
	for _, tt := range []struct {
		name  string
		names map[string]string
		path  string
		want  string
	}{
		{"given", names, "DB", "--db"},
		{"not given", names, "Stream.Name", "Stream.Name"},
		{"nil", nil, "DB", "DB"},
		{"under", Under(names, "Consumer"), "Plan.Deadline", "--deadline"},
		{"under, not given", Under(names, "Consumer"), "MaxDeliver", "MaxDeliver"},
		{"under, other prefix", Under(names, "Cons"), "umer.Plan.Deadline", "umer.Plan.Deadline"},
	} {
		if got := Name(tt.names, tt.path); got != tt.want {
			t.Errorf("%s: Name(%q) = %q, want %q", tt.name, tt.path, got, tt.want)
		}
	}
}
