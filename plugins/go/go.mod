module github.com/kubewasm/kubewasm/plugins/go

go 1.26
