"""Money: the fleet sized hour by hour (sizing.py), the bill of a fleet (bill.py), the volume a monthly spend
buys (spend.py), payback and NPV (economics.py), each hour at the K the deployment gives it (kday.py), and disaggregated
prefill/decode fleets: a prefill pool for the TTFT SLO, a decode pool for the TPOT SLO (disagg.py)."""
