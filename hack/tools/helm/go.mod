module nodehealth.io/nodehealth/hack/tools/helm

go 1.26.0
