module github.com/kubewasm/kubewasm/examples/fleet-propagation/go

go 1.26

require github.com/kubewasm/kubewasm/plugins/go v0.0.0

replace github.com/kubewasm/kubewasm/plugins/go => ../../../plugins/go
