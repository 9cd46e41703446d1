module nodehealth.io/nodehealth/test/bench/results

go 1.26.0
