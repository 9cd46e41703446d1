package measure

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux architecture Go runs on.
const clockTicks = 100

// Proc is a process's CPU time and memory, read from /proc.
type Proc struct {
	// CPU is utime + stime.
	CPU time.Duration
	// RSS is VmRSS and HWM VmHWM (the peak RSS), in bytes.
	RSS, HWM int64
	// Valid is false when the process could not be read (it has exited).
	Valid bool
}

// ReadProc reads pid's /proc/<pid>/stat and status; the zero Proc when the
// process is gone.
func ReadProc(pid int) Proc {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return Proc{}
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	p := Proc{CPU: time.Duration(utime+stime) * time.Second / clockTicks, Valid: true}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			p.RSS = kb << 10
		case "VmHWM:":
			p.HWM = kb << 10
		}
	}
	return p
}

// LoadAverage returns the 1, 5 and 15 minute load averages as /proc/loadavg
// has them ("?" when unreadable): a benchmark's figures mean little without
// what else the machine was doing.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
