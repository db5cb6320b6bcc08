"""The run layer: building hmb-bench for an MPI library (mpi, core), launching it (launch, with
the requirement table and library settings), sweeping grids (sweep), Slurm scripts (slurm), and
the commands that launch to check something (check, conform, advise). It reads and writes
results through the data layer and may run on the lab's nodes (hmb.lab). docs/architecture.md."""
