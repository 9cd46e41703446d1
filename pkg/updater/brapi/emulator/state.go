package emulator

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	// SettingsApply is how long a committed setting takes to reach the
	// updater: Bottlerocket's commit_and_apply answers once thar-be-settings
	// --daemon forked, and updog and thar-be-updates read the files it
	// renders. GET /settings answers the new value at once.
	SettingsApply time.Duration `json:"settingsApply,omitempty"`
}

// DefaultSettingsApply is the binary's and the simulated nodes' settings
// apply delay: long enough that an agent which refreshes right after
// pinning meets the old lock, short enough to keep the sandbox quick.
const DefaultSettingsApply = 500 * time.Millisecond

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
	Running string   `json:"running"`
	Variant string   `json:"variant"`
	Arch    string   `json:"arch"`
	Offered []string `json:"offered"`
	// BeforeWave are versions the repository publishes whose wave has not
	// reached this host: only settings.updates.ignore-waves offers them.
	BeforeWave []string `json:"beforeWave,omitempty"`
	// MaxVersion is the repository's max_version ("" for none): nothing
	// above it is offered, and a host above it goes back to the newest
	// version at most it.
	MaxVersion  string `json:"maxVersion,omitempty"`
	VersionLock string `json:"versionLock"`
	IgnoreWaves bool   `json:"ignoreWaves,omitempty"`
	// Applied are the settings the updater reads (updog.toml and
	// thar-be-updates.toml): the committed ones once ApplyAt passed.
	Applied Applied `json:"applied"`
	// ApplyAt is when the last commit's settings reach the updater; nil when
	// they did.
	ApplyAt *time.Time `json:"applyAt,omitempty"`
	// Pending is the uncommitted settings per settings transaction.
	Pending map[string]PendingSettings `json:"pendingSettings,omitempty"`
	// Inactive is the image really written to the inactive partition set
	// and valid to activate, "" when there is none (a fresh boot, or a
	// prepare that cleared it and failed). The status's staging_partition
	// is what the last refresh chose, which may differ.
	Inactive string `json:"inactive,omitempty"`
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

// Applied are the update settings as rendered for the updater.
type Applied struct {
	VersionLock string `json:"versionLock"`
	IgnoreWaves bool   `json:"ignoreWaves,omitempty"`
}

// PendingSettings are a transaction's uncommitted settings.updates.
type PendingSettings struct {
	VersionLock *string `json:"versionLock,omitempty"`
	IgnoreWaves *bool   `json:"ignoreWaves,omitempty"`
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

// applicable is what `updog whats --all` lists, newest first: the offered
// versions, and those before the host's wave when ignoreWaves, at most
// MaxVersion (updog's applicable_updates).
func (s *State) applicable(ignoreWaves bool) []string {
	out := slices.Clone(s.Offered)
	if ignoreWaves {
		for _, v := range s.BeforeWave {
			if !slices.ContainsFunc(out, func(o string) bool { return brapi.SameVersion(o, v) }) {
				out = append(out, v)
			}
		}
	}
	if s.MaxVersion != "" {
		out = slices.DeleteFunc(out, func(v string) bool {
			c, err := brapi.CompareVersions(v, s.MaxVersion)
			return err != nil || c > 0
		})
	}
	sortNewestFirst(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// choose is the update chosen from the applicable versions under lock, as
// thar-be-updates' update_available_updates and updog's update_required
// do: "latest" takes the newest version newer than the running one (or
// any, when the running one is above MaxVersion); a locked version is
// chosen only when it is applicable and is not the running version (it may
// be older: a lock can downgrade).
func (s *State) choose(applicable []string, lock string) string {
	if lock == "" || lock == brapi.VersionLockLatest {
		above := false
		if s.MaxVersion != "" {
			c, err := brapi.CompareVersions(s.Running, s.MaxVersion)
			above = err == nil && c > 0
		}
		for _, v := range applicable { // newest first
			if c, err := brapi.CompareVersions(v, s.Running); above || (err == nil && c > 0) {
				return v
			}
		}
		return ""
	}
	if brapi.SameVersion(lock, s.Running) {
		return ""
	}
	for _, v := range applicable {
		if brapi.SameVersion(v, lock) {
			return v
		}
	}
	return ""
}

// chosen is what the updater would take now, with the applied settings.
func (s *State) chosen() string {
	return s.choose(s.applicable(s.Applied.IgnoreWaves), s.Applied.VersionLock)
}

// publishLocked adds versions published before this host's wave, unless
// already offered.
func (s *State) publishLocked(versions []string) {
	for _, v := range versions {
		same := func(o string) bool { return brapi.SameVersion(o, v) }
		if !slices.ContainsFunc(s.Offered, same) && !slices.ContainsFunc(s.BeforeWave, same) {
			s.BeforeWave = append(s.BeforeWave, v)
		}
	}
	sortNewestFirst(s.BeforeWave)
}

// nextBoot is the image the next boot runs when an update is activated, ""
// when the running set boots next.
func (s *State) nextBoot() string {
	if s.Status == nil || s.Status.ActivatedVersion() == "" {
		return ""
	}
	return s.Inactive
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
	if s.Applied.VersionLock == "" {
		// A file from before the settings were applied asynchronously.
		s.Applied = Applied{VersionLock: s.VersionLock, IgnoreWaves: s.IgnoreWaves}
	}
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
