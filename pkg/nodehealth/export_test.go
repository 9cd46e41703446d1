package nodehealth

// LeaseNameFor is leaseNameFor for the simulation (package nodehealth_test).
var LeaseNameFor = leaseNameFor
