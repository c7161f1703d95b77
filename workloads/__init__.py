"""Job generators (GNN training, LLM training DP/PP/EP/TP, MINC request streams).

Not built yet: the traffic-engine issue defines the Job model this package
generates. Pure code.
"""
