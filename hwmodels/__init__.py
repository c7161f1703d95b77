"""Intra-host interconnect and SmartNIC/FPGA datapath models (numba).

Interconnect graphs and presets (graph), the transfer model (transfer), DGCL's
SPST (dgcl), LEO's datapaths (leo), the two host models (plugin) and the kinds
a cluster file names (intra_host, datapath; registered in railbed.hosts.KINDS).
Pure code: no root, no Mininet.
"""
