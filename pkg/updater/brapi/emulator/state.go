package emulator

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"nodehealth.io/nodehealth/pkg/updater/brapi"
)

// Faults are the failures the emulator injects. Counters (…Next) count down
// as requests consume them; the booleans hold until cleared.
type Faults struct {
	// RefreshFails, PrepareFails, ActivateFails and DeactivateFails make the
	// command run and finish Failed (exit status 1), as when updog fails; the
	// update state does not advance.
	RefreshFails    bool `json:"refreshFails,omitempty"`
	PrepareFails    bool `json:"prepareFails,omitempty"`
	ActivateFails   bool `json:"activateFails,omitempty"`
	DeactivateFails bool `json:"deactivateFails,omitempty"`
	// RebootHangs accepts POST /actions/reboot but never reboots: the hook
	// does not run and the running version stays.
	RebootHangs bool `json:"rebootHangs,omitempty"`
	// RefuseRebootNext answers the next N POST /actions/reboot 500 without
	// rebooting, as Bottlerocket's API server does when the reboot command
	// fails: it runs `systemctl reboot --check-inhibitors=yes` and answers
	// a failure with its Reboot error, 500, body "Failed to reboot, exit
	// code: N, stderr: …" — an active shutdown inhibitor refuses it. The
	// host is then definitely not going down. (Checked against
	// bottlerocket-core-kit sources/api/apiserver/src/server/mod.rs, the
	// reboot handler and ResponseError's status codes;
	// docs/updater-emulator.md lists what else was checked.)
	RefuseRebootNext int `json:"refuseRebootNext,omitempty"`
	// NeverComesUp makes the activated version fail to boot: the reboot
	// happens (the hook runs) but the host comes back on the version it ran
	// before, as Bottlerocket does when the new partition set fails to boot.
	NeverComesUp bool `json:"neverComesUp,omitempty"`
	// DropNext closes the connection of the next N API requests without an
	// answer, as an API server dying mid-request.
	DropNext int `json:"dropNext,omitempty"`
	// ServerErrorNext answers the next N API requests 500.
	ServerErrorNext int `json:"serverErrorNext,omitempty"`
	// MalformedNext answers the next N JSON-returning API requests 200 with
	// truncated JSON.
	MalformedNext int `json:"malformedNext,omitempty"`
}

// Delays are how long each update command runs (the API answers 423 to
// /updates/status and to other actions meanwhile), and how long the host
// takes from the reboot request to shutting down (the hook).
type Delays struct {
	Refresh    time.Duration `json:"refresh,omitempty"`
	Prepare    time.Duration `json:"prepare,omitempty"`
	Activate   time.Duration `json:"activate,omitempty"`
	Deactivate time.Duration `json:"deactivate,omitempty"`
	Reboot     time.Duration `json:"reboot,omitempty"`
}

func (d Delays) of(cmd brapi.CommandType) time.Duration {
	switch cmd {
	case brapi.CommandRefresh:
		return d.Refresh
	case brapi.CommandPrepare:
		return d.Prepare
	case brapi.CommandActivate:
		return d.Activate
	case brapi.CommandDeactivate:
		return d.Deactivate
	}
	return 0
}

// InFlight is an update command still running.
type InFlight struct {
	Cmd    brapi.CommandType `json:"cmd"`
	DoneAt time.Time         `json:"doneAt"`
}

// State is the emulated host: what it runs, what the update repository
// offers, its settings and the update dispatcher's status. It is what the
// state file holds and GET /emulator/state answers.
type State struct {
	Running     string   `json:"running"`
	Variant     string   `json:"variant"`
	Arch        string   `json:"arch"`
	Offered     []string `json:"offered"`
	VersionLock string   `json:"versionLock"`
	// Pending is the uncommitted version-lock per settings transaction.
	Pending map[string]string `json:"pending,omitempty"`
	// Status is the dispatcher's status; nil until the first update command
	// after a boot (GET /updates/status answers 404 meanwhile, as on a host
	// whose /run was just emptied by a reboot).
	Status   *brapi.UpdateStatus `json:"status,omitempty"`
	InFlight *InFlight           `json:"inFlight,omitempty"`
	// Reboots counts completed reboots: a test's "never twice" check.
	Reboots int `json:"reboots"`
	// RebootRequests counts accepted POST /actions/reboot.
	RebootRequests int `json:"rebootRequests"`
	// RebootsRefused counts POST /actions/reboot answered 500
	// (Faults.RefuseRebootNext).
	RebootsRefused int    `json:"rebootsRefused,omitempty"`
	Faults         Faults `json:"faults"`
	Delays         Delays `json:"delays"`
	// Rebooting is true between an accepted reboot and the boot; API
	// requests are dropped meanwhile. Not persisted across restarts.
	Rebooting bool `json:"rebooting,omitempty"`
}

func (s *State) clone() State {
	b, _ := json.Marshal(s)
	var c State
	_ = json.Unmarshal(b, &c)
	return c
}

func sortNewestFirst(vs []string) {
	sort.SliceStable(vs, func(i, j int) bool {
		c, err := brapi.CompareVersions(vs[i], vs[j])
		return err == nil && c > 0
	})
}

// chosen is the update a refresh chooses under the version lock, as the
// dispatcher does: "latest" takes the newest offered version newer than the
// running one; a locked version is chosen only when it is offered and is not
// the running version (it may be older: a lock can downgrade).
func (s *State) chosen() string {
	if s.VersionLock == "" || s.VersionLock == brapi.VersionLockLatest {
		for _, v := range s.Offered { // newest first
			if c, err := brapi.CompareVersions(v, s.Running); err == nil && c > 0 {
				return v
			}
		}
		return ""
	}
	if brapi.SameVersion(s.VersionLock, s.Running) {
		return ""
	}
	for _, v := range s.Offered {
		if brapi.SameVersion(v, s.VersionLock) {
			return v
		}
	}
	return ""
}

func (s *State) image(version string) *brapi.UpdateImage {
	return &brapi.UpdateImage{Arch: s.Arch, Version: version, Variant: s.Variant}
}

// initStatus creates the dispatcher's status as its first command after a
// boot does.
func (s *State) initStatus() {
	if s.Status != nil {
		return
	}
	s.Status = &brapi.UpdateStatus{
		UpdateState:      brapi.StateIdle,
		AvailableUpdates: []string{},
		ActivePartition:  &brapi.StagedImage{Image: s.image(s.Running), NextToBoot: true},
	}
}

func loadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if _, err := brapi.ParseVersion(s.Running); err != nil {
		return nil, fmt.Errorf("state file %s: running version: %w", path, err)
	}
	s.Rebooting = false
	return &s, nil
}

func saveState(path string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
