"""A worked example of a vendor's tablectl driver: the Acme CS-9 card-reading shoe.

``protocol`` is the wire (sans I/O, shared by driver and simulator), ``driver`` the
tablectl driver registered as ``acme-cs9``, ``simulator`` the device on a pty.
"""
