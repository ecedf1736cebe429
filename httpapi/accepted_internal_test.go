package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/jobs"
)

// TestAcceptedJSON: the accept's answer is the bytes c.JSON wrote for it
// (json.Marshal of the map, keys in order), joined or not.
func TestAcceptedJSON(t *testing.T) {
	for _, j := range []*jobs.Job{{ID: "01a2364d-2019-7d1b-a119-297bf3814cb0"}, {ID: "01a2364d-2019-7d1b-a119-297bf3814cb0", Coalesced: true}, {ID: `odd"<id>`}} {
		want := gin.H{"job_id": j.ID}
		if j.Coalesced {
			want["coalesced"] = true
		}
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := acceptedJSON(j); string(got) != string(b) {
			t.Errorf("%+v: %s, want %s", j, got, b)
		}
	}
}
