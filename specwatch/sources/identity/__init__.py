"""Who a server is: its process, code origin and the identity it reports."""
