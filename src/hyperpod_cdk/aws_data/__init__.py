"""AWS's own words and data, and their readers: the support table, the API model's constraints, the inventory
of AWS's pages, the update policies, the instance catalogue and prices (the files are in ``hyperpod_cdk/data``)."""
