// Module nodehealth.io/heartbeat is the Lease renewer extension authors embed.
module nodehealth.io/heartbeat

go 1.26.0
