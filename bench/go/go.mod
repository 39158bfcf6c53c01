module weftbench

go 1.25
