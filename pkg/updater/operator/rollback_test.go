package operator

import (
	"testing"


	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

func rollbackPolicy(p *updatesv1alpha1.UpdatePolicy) {
	p.Spec.OnHealthGateFailure = updatesv1alpha1.HealthGateFailureRollback
}

func TestOnHealthGateFailureIsHaltRollbackOrAnInvalidSpec(t *testing.T) {
	for _, tc := range []struct {
		action   updatesv1alpha1.HealthGateFailureAction
		rollback bool
		invalid  string
	}{
		{action: "", rollback: false},
		{action: updatesv1alpha1.HealthGateFailureHalt, rollback: false},
		{action: updatesv1alpha1.HealthGateFailureRollback, rollback: true},
		{action: "Retry", invalid: `spec.onHealthGateFailure "Retry" must be Halt or Rollback`},
	} {
		p := parsePolicy(fleet(func(p *updatesv1alpha1.UpdatePolicy) { p.Spec.OnHealthGateFailure = tc.action }), defaultOptions().Deadlines)
		if p.rollback != tc.rollback || p.invalid != tc.invalid {
			t.Errorf("%q: rollback %v invalid %q, want %v %q", tc.action, p.rollback, p.invalid, tc.rollback, tc.invalid)
		}
	}
}
