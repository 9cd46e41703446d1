package brapi

import (
	"strings"
	"time"
)

// The wire shapes below are those of Bottlerocket's apiserver and its update
// dispatcher (thar-be-updates): snake_case field names, update states and
// command statuses in CamelCase, command types in kebab-case. Versions are
// semantic-version strings ("1.20.3").

// UpdateState is the update dispatcher's state machine:
// Idle → Available (refresh found a chosen update) → Staged (prepare wrote it
// to the inactive partition) → Ready (activate marked it for the next boot).
// Deactivate goes back from Ready to Staged.
type UpdateState string

const (
	StateIdle      UpdateState = "Idle"
	StateAvailable UpdateState = "Available"
	StateStaged    UpdateState = "Staged"
	StateReady     UpdateState = "Ready"
)

func (s UpdateState) valid() bool {
	switch s {
	case StateIdle, StateAvailable, StateStaged, StateReady:
		return true
	}
	return false
}

// CommandType names an update command in most_recent_command.cmd_type.
type CommandType string

const (
	CommandRefresh    CommandType = "refresh"
	CommandPrepare    CommandType = "prepare"
	CommandActivate   CommandType = "activate"
	CommandDeactivate CommandType = "deactivate"
)

// CommandStatus is the outcome of an update command.
type CommandStatus string

const (
	CommandSuccess CommandStatus = "Success"
	CommandFailed  CommandStatus = "Failed"
	CommandUnknown CommandStatus = "Unknown"
)

// OSInfo is the answer of GET /os (Bottlerocket's release information).
type OSInfo struct {
	PrettyName string `json:"pretty_name,omitempty"`
	VariantID  string `json:"variant_id,omitempty"`
	VersionID  string `json:"version_id"`
	BuildID    string `json:"build_id,omitempty"`
	Arch       string `json:"arch,omitempty"`
}

// UpdateImage is one Bottlerocket image: the chosen update or what a
// partition set holds.
type UpdateImage struct {
	Arch    string `json:"arch"`
	Version string `json:"version"`
	Variant string `json:"variant"`
}

// StagedImage is the image a partition set holds and whether it boots next.
type StagedImage struct {
	Image      *UpdateImage `json:"image"`
	NextToBoot bool         `json:"next_to_boot"`
}

// CommandResult is most_recent_command: the last update command the
// dispatcher finished. Timestamp is when it finished.
type CommandResult struct {
	CmdType    CommandType   `json:"cmd_type"`
	CmdStatus  CommandStatus `json:"cmd_status"`
	Timestamp  time.Time     `json:"timestamp"`
	ExitStatus *int32        `json:"exit_status"`
	Stderr     *string       `json:"stderr"`
}

// UpdateStatus is the answer of GET /updates/status.
type UpdateStatus struct {
	UpdateState       UpdateState    `json:"update_state"`
	AvailableUpdates  []string       `json:"available_updates"`
	ChosenUpdate      *UpdateImage   `json:"chosen_update"`
	ActivePartition   *StagedImage   `json:"active_partition"`
	StagingPartition  *StagedImage   `json:"staging_partition"`
	MostRecentCommand *CommandResult `json:"most_recent_command"`
}

// ChosenVersion is the version the updater would prepare, or "" when none is
// chosen.
func (s *UpdateStatus) ChosenVersion() string {
	if s == nil || s.ChosenUpdate == nil {
		return ""
	}
	return s.ChosenUpdate.Version
}

// StagedVersion is the version written to the inactive partition set, or "".
func (s *UpdateStatus) StagedVersion() string {
	if s == nil || s.StagingPartition == nil || s.StagingPartition.Image == nil {
		return ""
	}
	return s.StagingPartition.Image.Version
}

// PreparedVersion is what the most recent command wrote to the inactive
// partition set, when it is a successful prepare: Bottlerocket's status
// names the last refresh's choice as staged, but updog update-image chooses
// again from the settings it reads then and says on stderr, which the
// dispatcher records, "Starting update to V" or, having written nothing,
// "No update required" (version ""). ok is false when the most recent
// command is not a successful prepare or its stderr says neither.
func (s *UpdateStatus) PreparedVersion() (version string, ok bool) {
	if s == nil || s.MostRecentCommand == nil || s.MostRecentCommand.CmdType != CommandPrepare ||
		s.MostRecentCommand.CmdStatus != CommandSuccess || s.MostRecentCommand.Stderr == nil {
		return "", false
	}
	for _, line := range strings.Split(*s.MostRecentCommand.Stderr, "\n") {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "Starting update to "); found {
			return strings.TrimSpace(v), true
		}
	}
	if strings.Contains(*s.MostRecentCommand.Stderr, "No update required") {
		return "", true
	}
	return "", false
}

// ActivatedVersion is the staged version when it is marked to boot next, or
// "" when the next boot stays on the running partition set.
func (s *UpdateStatus) ActivatedVersion() string {
	if s == nil || s.StagingPartition == nil || !s.StagingPartition.NextToBoot {
		return ""
	}
	return s.StagedVersion()
}

// VersionLockLatest is the version-lock value that lets the updater choose
// the newest offered version (Bottlerocket's default).
const VersionLockLatest = "latest"

// Settings is the part of GET /settings and PATCH /settings this client
// reads and writes.
type Settings struct {
	Updates *UpdatesSettings `json:"updates,omitempty"`
}

// UpdatesSettings is settings.updates.
type UpdatesSettings struct {
	VersionLock *string `json:"version-lock,omitempty"`
	IgnoreWaves *bool   `json:"ignore-waves,omitempty"`
}
