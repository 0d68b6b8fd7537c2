"""Money: the fleet sized hour by hour (sizing.py), the bill of a fleet (bill.py), the volume a monthly spend
buys (spend.py), payback and NPV (economics.py), and each hour at the K the deployment gives it (kday.py)."""
