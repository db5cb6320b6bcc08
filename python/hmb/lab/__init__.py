"""`hmb lab`: nodes on one machine (network and UTS namespaces on a bridge), so MPI traffic between
ranks takes the network path; MPI and Slurm on them. docs/lab.md, docs/architecture.md."""
