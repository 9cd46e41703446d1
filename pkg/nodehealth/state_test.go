package nodehealth

import (
	"testing"
	"time"
)

// A record written before the timeline existed still parses, and has none.
func TestABootRecordWithoutATimelineStillParses(t *testing.T) {
	rec, ok := parseBootRecord(`{"bootID":"boot-1","uid":"uid-n1","failedOpen":["gpu"]}`)
	if !ok || rec.BootID != "boot-1" || rec.UID != "uid-n1" || len(rec.FailedOpen) != 1 {
		t.Fatalf("old record: %+v, %v", rec, ok)
	}
	if rec.Startup != nil {
		t.Errorf("old record has a timeline: %+v", rec.Startup)
	}
}

// A record from a newer controller, with fields this one does not know (in
// the record and in its timeline), parses: what is known is kept.
func TestABootRecordWithUnknownFieldsFromANewerVersionParses(t *testing.T) {
	rec, ok := parseBootRecord(`{"bootID":"boot-1","uid":"uid-n1","hint":{"x":1},` +
		`"startup":{"cause":"NodeRebooted","start":"2026-11-21T10:00:00Z","ready":"41s","phase":"kernel",` +
		`"extensions":[{"name":"cni","ready":"38s","restarts":2}]}}`)
	if !ok || rec.Startup == nil {
		t.Fatalf("newer record: %+v, %v", rec, ok)
	}
	if rec.Startup.Ready.Duration != 41*time.Second || len(rec.Startup.Extensions) != 1 || rec.Startup.Extensions[0].Ready.Duration != 38*time.Second {
		t.Errorf("timeline: %+v", rec.Startup)
	}
}
