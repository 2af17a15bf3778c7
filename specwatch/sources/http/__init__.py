"""HTTP for every request specwatch sends: the one client, its limits and deadlines, banners,
addresses and one-line errors."""
