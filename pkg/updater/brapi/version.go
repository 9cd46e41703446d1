package brapi

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed Bottlerocket version (semantic versioning: major,
// minor, patch and an optional pre-release; build metadata is ignored).
type Version struct {
	Major, Minor, Patch uint64
	Pre                 string
}

func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// ParseVersion parses "1.20.3", "v1.20.3" and, like Bottlerocket's
// version-lock setting, "1.20" (patch 0).
func ParseVersion(s string) (Version, error) {
	in := s
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	var v Version
	if i := strings.IndexByte(s, '-'); i >= 0 {
		v.Pre = s[i+1:]
		s = s[:i]
		if v.Pre == "" {
			return Version{}, fmt.Errorf("version %q: empty pre-release", in)
		}
	}
	parts := strings.Split(s, ".")
	if len(parts) == 2 {
		parts = append(parts, "0")
	}
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", in)
	}
	nums := make([]uint64, 3)
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("version %q: %q is not a number", in, p)
		}
		nums[i] = n
	}
	v.Major, v.Minor, v.Patch = nums[0], nums[1], nums[2]
	return v, nil
}

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than o.
// A pre-release is older than its release; pre-releases compare as strings.
func (v Version) Compare(o Version) int {
	for _, d := range [][2]uint64{{v.Major, o.Major}, {v.Minor, o.Minor}, {v.Patch, o.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case v.Pre == o.Pre:
		return 0
	case v.Pre == "":
		return 1
	case o.Pre == "":
		return -1
	case v.Pre < o.Pre:
		return -1
	}
	return 1
}

// CompareVersions parses both versions and compares them.
func CompareVersions(a, b string) (int, error) {
	va, err := ParseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := ParseVersion(b)
	if err != nil {
		return 0, err
	}
	return va.Compare(vb), nil
}

// SameVersion reports whether a and b name the same version ("v1.2.3" and
// "1.2.3" do); unparsable versions are compared as strings.
func SameVersion(a, b string) bool {
	c, err := CompareVersions(a, b)
	if err != nil {
		return a == b
	}
	return c == 0
}

// ValidateVersionLock accepts what Bottlerocket accepts in
// settings.updates.version-lock: "latest" or a version.
func ValidateVersionLock(lock string) error {
	if lock == VersionLockLatest {
		return nil
	}
	if _, err := ParseVersion(lock); err != nil {
		return fmt.Errorf("invalid version-lock %q: want %q or a version like 1.20.3: %w", lock, VersionLockLatest, err)
	}
	return nil
}
