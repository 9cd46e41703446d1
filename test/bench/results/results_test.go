package results

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestWriteReadRoundTrip(t *testing.T) {
	d := New("scale", time.Date(2026, 11, 23, 6, 0, 0, 0, time.FixedZone("x", 3600)))
	d.Points = []Point{{Nodes: 100, Extensions: 5, Metrics: map[string]float64{"detectionP99Ms": 126}}}
	d.Series = []Series{{Name: "rollout", Nodes: 100, Columns: []string{"updated"}, Samples: []Sample{{Seconds: 1.5, Values: []float64{3}}}}}
	path := filepath.Join(t.TempDir(), "sub", "scale.json")
	if err := d.Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Date != "2026-11-23T05:00:00Z" {
		t.Errorf("date not normalised to UTC: %s", got.Date)
	}
	if !reflect.DeepEqual(got, d) {
		t.Errorf("round trip changed the document:\n got %+v\nwant %+v", got, d)
	}
}

func TestReadRejectsUnnamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	if err := (&Document{}).Write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Fatal("a document without a benchmark name was accepted")
	}
}
