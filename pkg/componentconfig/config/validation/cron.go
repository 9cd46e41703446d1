package validation

import (
	"fmt"
	"strconv"
	"strings"
)

// cronField describes one field of a standard 5-field cron expression.
type cronField struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i (jan..dec, sun..sat)
}

var cronFields = []cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	// 7 is accepted as Sunday, like Vixie cron and the CronJob controller.
	{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

var cronDescriptors = map[string]bool{"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true, "@daily": true, "@midnight": true, "@hourly": true}

// ValidateCronSchedule checks a standard cron schedule: five fields (minute
// hour day-of-month month day-of-week) of *, values, ranges a-b, steps /n and
// comma lists, month and weekday names, or one of @yearly, @monthly,
// @weekly, @daily and @hourly. It is the syntax the Kubernetes CronJob
// controller accepts (without time zones: windows are evaluated in UTC).
func ValidateCronSchedule(s string) error {
	s = strings.TrimSpace(s)
	if cronDescriptors[strings.ToLower(s)] {
		return nil
	}
	fields := strings.Fields(s)
	if len(fields) != len(cronFields) {
		return fmt.Errorf("must have 5 fields (minute hour day-of-month month day-of-week), found %d", len(fields))
	}
	for i, f := range fields {
		if err := validateCronField(f, cronFields[i]); err != nil {
			return fmt.Errorf("%s field %q: %w", cronFields[i].name, f, err)
		}
	}
	return nil
}

func validateCronField(s string, f cronField) error {
	for _, part := range strings.Split(s, ",") {
		rangePart, step, hasStep := strings.Cut(part, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n < 1 {
				return fmt.Errorf("step %q must be a positive number", step)
			}
		}
		if rangePart == "*" {
			continue
		}
		lo, hi, isRange := strings.Cut(rangePart, "-")
		from, err := cronValue(lo, f)
		if err != nil {
			return err
		}
		to := from
		if isRange {
			if to, err = cronValue(hi, f); err != nil {
				return err
			}
			if to < from {
				return fmt.Errorf("range %q ends before it starts", rangePart)
			}
		}
	}
	return nil
}

func cronValue(s string, f cronField) (int, error) {
	for i, name := range f.names {
		if strings.EqualFold(s, name) {
			return f.min + i, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%d is outside %d-%d", n, f.min, f.max)
	}
	return n, nil
}
