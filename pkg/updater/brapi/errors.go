package brapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrMalformed marks an answer that is not what the API documents (bad JSON,
// a missing or unknown field value). It is not retried: a restarting API
// refuses connections, it does not answer nonsense.
var ErrMalformed = errors.New("malformed answer")

// Error is a failed call: which call, after how many attempts, and what the
// API answered (status and an excerpt of the body) or why nothing came back.
type Error struct {
	// Call is the method and path, e.g. "POST /actions/prepare-update".
	Call     string
	Attempts int
	// StatusCode is 0 when no answer arrived.
	StatusCode int
	// Body is the start of the answer's body, for the message.
	Body string
	// Err is the transport error, ErrMalformed (wrapped) or a context error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bottlerocket API %s", e.Call)
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
		if e.Body != "" {
			fmt.Fprintf(&b, ": %q", e.Body)
		}
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// StatusCode returns the HTTP status the API answered a failed call with, or
// 0 when the error carries none.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsLocked reports a 423: another update command holds the update lock.
func IsLocked(err error) bool { return StatusCode(err) == http.StatusLocked }

// IsConflict reports a 409: the action is not allowed in the current update
// state (e.g. activate before prepare).
func IsConflict(err error) bool { return StatusCode(err) == http.StatusConflict }

// IsNotFound reports a 404: no chosen update, nothing staged, or (for
// GET /updates/status) a status not yet initialized since boot.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// CommandError is an update command that ran and failed: the dispatcher
// recorded it in most_recent_command with cmd_status Failed.
type CommandError struct {
	Result CommandResult
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("bottlerocket update command %s finished %s", e.Result.CmdType, e.Result.CmdStatus)
	if e.Result.ExitStatus != nil {
		msg += fmt.Sprintf(" (exit status %d)", *e.Result.ExitStatus)
	}
	if e.Result.Stderr != nil && *e.Result.Stderr != "" {
		msg += ": " + excerpt([]byte(*e.Result.Stderr))
	}
	return msg
}

// IsCommandFailed reports whether err is a CommandError.
func IsCommandFailed(err error) bool {
	var e *CommandError
	return errors.As(err, &e)
}

const excerptLen = 256

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > excerptLen {
		s = s[:excerptLen] + "…"
	}
	return s
}
