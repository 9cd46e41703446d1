// Module nodehealth.io/client-go holds the generated typed clients, listers,
// informers and apply configurations for nodehealth's API types.
module nodehealth.io/client-go

go 1.26.0
