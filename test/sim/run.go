package sim

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

var (
	flagSeed    = flag.String("sim.seed", "", "run only this seed (replays a failure)")
	flagSeeds   = flag.Int("sim.seeds", 0, "random seeds each sim.Run adds to its fixed seeds (go test runs only the fixed ones, so that CI is deterministic; make simulate adds random ones)")
	flagVerbose = flag.Bool("sim.verbose", false, "log each seed's trace")
	flagKlogV   = flag.Int("sim.v", 0, "the product's log verbosity (klog -v) while replaying a seed: 5 shows every Lease event the controller handles")
	flagFresh   = flag.String("sim.fresh", "", "draw the -sim.seeds seeds from this string (the commit: the same commit runs the same fresh seeds, each commit new ones) and run only those, not the fixed ones (which go test runs anyway)")
)

// Regression is a seed that once failed, kept with what it found so that it
// runs on every go test.
type Regression struct {
	Seed uint64
	Name string
}

// Regressions is a test's list of regression seeds.
type Regressions []Regression

// Seeds are the regressions' seeds, for Run.
func (rs Regressions) Seeds() []uint64 {
	seeds := make([]uint64, len(rs))
	for i, r := range rs {
		seeds[i] = r.Seed
	}
	return seeds
}

// Run runs fn as a subtest name/seed=N for each of seeds and -sim.seeds random
// ones (with -sim.fresh: only -sim.seeds seeds drawn from it), or only for
// -sim.seed. fn returns the run's trace (or nil): its hash is
// logged, and the whole trace with -sim.verbose. A failed seed logs the one
// command line that replays it.
func Run(t *testing.T, name string, seeds []uint64, fn func(t *testing.T, seed uint64) *Trace) {
	t.Helper()
	seeds = append([]uint64(nil), seeds...)
	if *flagFresh != "" {
		seeds = freshSeeds(*flagFresh, t.Name()+"/"+name, *flagSeeds)
	} else {
		for range *flagSeeds {
			seeds = append(seeds, rand.Uint64()) // new ones each run: the replay line makes them reproducible
		}
	}
	if *flagSeed != "" {
		seed, err := strconv.ParseUint(*flagSeed, 10, 64)
		if err != nil {
			t.Fatalf("-sim.seed=%q: %v", *flagSeed, err)
		}
		seeds = []uint64{seed}
	}
	t.Run(name, func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				// Seeds share nothing, and a run spends most of its time
				// waiting for goroutines to go idle: they run side by side.
				t.Parallel()
				defer func() {
					if t.Failed() {
						t.Logf("replay: go test %s -run '^%s$' -sim.seed=%d -sim.verbose",
							packageDir(), strings.Split(t.Name(), "/")[0], seed)
					}
				}()
				if tr := fn(t, seed); tr != nil {
					t.Logf("trace %s, %d lines", tr.Hash(), tr.Len())
					if *flagVerbose {
						t.Log("\n" + tr.String())
					}
				}
			})
		}
	})
}

// freshSeeds derives n seeds from from and the run's name: a CI run of a
// commit runs the same fresh seeds on every retry (a failure is not luck to
// be retried away), and the next commit runs new ones.
func freshSeeds(from, run string, n int) []uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(from + "\x00" + run))
	r := rand.New(rand.NewPCG(h.Sum64(), 0x6e6f64656865616c)) // "nodeheal"
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = r.Uint64()
	}
	return seeds
}

// packageDir is the test's package as ./dir from the module root: go test
// runs a package's tests in its directory.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for root := wd; ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(root) == root {
			return "."
		}
	}
}

// Parallel is how many seeds run at once in a package whose TestMain is
// Main, unless -test.parallel says otherwise. A seed's run mostly sleeps in
// Settle's idle polls, so go test's default (GOMAXPROCS) leaves the cores
// idle (docs/development.md, "Tests", has the figures). make simulate sets
// its own (SIM_PARALLEL).
const Parallel = 8

// Main is a TestMain for a package that runs simulations: it runs the seeds
// Parallel at a time unless -test.parallel is set.
func Main(m *testing.M) {
	flag.Parse()
	if *flagKlogV > 0 {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", strconv.Itoa(*flagKlogV))
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(Parallel))
	}
	os.Exit(m.Run())
}
