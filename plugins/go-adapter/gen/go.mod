module gw-go-adapter-gen

go 1.19
