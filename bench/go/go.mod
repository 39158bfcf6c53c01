module weftbench

go 1.22
