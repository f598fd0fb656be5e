"""The schema of ``OS::Nova::Server``: its properties and attributes, as Heat's reference has them.

Callers: ``convergence.plugins.openstack.nova_server`` declares :data:`SCHEMA` as the type's
schema; the request builders (``nova_server_boot``, ``nova_server_networks``) and the update
(``nova_server_update``) read the policy names and the allowed values from here. Property
names, types, defaults, allowed values and which properties update in place follow Heat's
``OS::Nova::Server`` (``heat/engine/resources/openstack/nova/server.py``); the hidden and
deprecated properties Heat still accepts (``admin_user``, ``networks/uuid``,
``block_device_mapping_v2/image_id``, ``personality``) are accepted too, so that templates
written for Heat keep validating.
"""

from __future__ import annotations

from typing import Any

from convergence.plugins.openstack import implicit
from convergence.template.properties import (
    BOOLEAN,
    INTEGER,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

RESIZE, REPLACE, REBUILD, REBUILD_PRESERVE_EPHEMERAL, IGNORE = (
    "RESIZE", "REPLACE", "REBUILD", "REBUILD_PRESERVE_EPHEMERAL", "IGNORE")
HEAT_CFNTOOLS, RAW, SOFTWARE_CONFIG = "HEAT_CFNTOOLS", "RAW", "SOFTWARE_CONFIG"
TRANSPORTS = ("POLL_SERVER_CFN", "POLL_SERVER_HEAT", "POLL_TEMP_URL", "ZAQAR_MESSAGE")
ALLOCATIONS = ("none", "auto")  # networks/allocate_network, Nova 2.37's special values


def _s(description: str, **kwargs: Any) -> PropertySchema:
    return PropertySchema(STRING, description, **kwargs)


BLOCK_DEVICE_MAPPING = PropertySchema(MAP, schema={
    "device_name": _s("The device the volume appears as (/dev/device_name, typically vda).",
                      required=True),
    "volume_id": _s("The volume to boot from (or snapshot_id).",
                    custom_constraint="cinder.volume"),
    "snapshot_id": _s("The volume snapshot to make the volume from.",
                      custom_constraint="cinder.snapshot"),
    "volume_size": PropertySchema(INTEGER, "The volume's size in GB (Nova infers it if "
                                           "left out)."),
    "delete_on_termination": PropertySchema(BOOLEAN, "Whether the volume is deleted with "
                                                     "the server."),
})

BLOCK_DEVICE_MAPPING_V2 = PropertySchema(MAP, schema={
    "device_name": _s("The device the volume appears as (/dev/device_name)."),
    "volume_id": _s("A volume to attach, bootable or not.", custom_constraint="cinder.volume"),
    "image_id": _s("Hidden: use image.", custom_constraint="glance.image"),
    "image": _s("The name or id of an image to make the volume from.",
                custom_constraint="glance.image"),
    "snapshot_id": _s("A volume snapshot to make the volume from.",
                      custom_constraint="cinder.snapshot"),
    "swap_size": PropertySchema(INTEGER, "The size of a swap disk, in MB."),
    "device_type": _s("disk or cdrom.", allowed_values=("cdrom", "disk")),
    "disk_bus": _s("The device's bus (the hypervisor chooses if left out).",
                   allowed_values=("ide", "lame_bus", "sata", "scsi", "usb", "virtio")),
    "boot_index": PropertySchema(INTEGER, "The boot order: 0 for bootable sources by "
                                          "default, -1 for the others."),
    "volume_size": PropertySchema(INTEGER, "The device's size in GB."),
    "delete_on_termination": PropertySchema(BOOLEAN, "Whether the volume is deleted with the "
                                                     "server."),
    "ephemeral_size": PropertySchema(INTEGER, "The size of a local ephemeral disk, in GB.",
                                     min=1),
    "ephemeral_format": _s("The file system of the ephemeral disk.",
                           allowed_values=("ext2", "ext3", "ext4", "xfs", "ntfs")),
    "volume_type": _s("The volume type of a new volume (Nova 2.67+).",
                      custom_constraint="cinder.vtype"),
})

# Heat's OS::Neutron::Port extra_properties_schema: what a port the server makes may be given.
PORT_EXTRA_PROPERTIES = {
    "value_specs": PropertySchema(MAP, "Extra settings passed to Neutron as they are.",
                                  default={}, update_allowed=True),
    "admin_state_up": PropertySchema(BOOLEAN, "Whether the port is up.", default=True,
                                     update_allowed=True),
    "mac_address": _s("The port's MAC address (admins only, by default).",
                      custom_constraint="mac_addr"),
    "allowed_address_pairs": PropertySchema(
        LIST, "More MAC/IP pairs allowed through the port.", update_allowed=True,
        item=PropertySchema(MAP, schema={
            "mac_address": _s("A MAC address.", custom_constraint="mac_addr"),
            "ip_address": _s("An address or CIDR.", required=True,
                             custom_constraint="ip_or_cidr")})),
    "binding:vnic_type": _s("The VNIC type to bind.", default="normal", update_allowed=True,
                            allowed_values=("normal", "direct", "macvtap", "direct-physical",
                                            "baremetal", "virtio-forwarder", "smart-nic")),
    "port_security_enabled": PropertySchema(BOOLEAN, "Whether port security is on.",
                                            update_allowed=True),
    "qos_policy": _s("A QoS policy's name or id.", update_allowed=True,
                     custom_constraint="neutron.qos_policy"),
    "propagate_uplink_status": PropertySchema(BOOLEAN, "Whether the uplink status "
                                                       "propagates.", update_allowed=True),
    "no_fixed_ips": PropertySchema(BOOLEAN, "Whether the port has no fixed IP.",
                                   default=False, update_allowed=True),
}

NETWORK = PropertySchema(MAP, schema={
    "uuid": _s("Hidden: use network.", custom_constraint="neutron.network"),
    "network": _s("The name or id of a network to make a port on.",
                  custom_constraint="neutron.network"),
    "allocate_network": _s("auto (a network the project has, or one made for it) or none "
                           "(no network); not with the other keys.",
                           allowed_values=ALLOCATIONS, update_allowed=True),
    "fixed_ip": _s("The fixed address of the port made on the network.",
                   custom_constraint="ip_addr"),
    "port": _s("The id of an existing port to plug the server into.",
               custom_constraint="neutron.port"),
    "port_extra_properties": PropertySchema(MAP, "Settings of the port made for this entry "
                                                 "(not with port).",
                                            schema=PORT_EXTRA_PROPERTIES,
                                            update_allowed=True),
    "subnet": _s("The subnet to take the port's address from (network then optional)."),
    "floating_ip": _s("The id of a floating IP to associate with the port."),
    "tag": _s("The interface's device tag (changes are ignored: Nova cannot change it)."),
})

PROPERTIES = {
    "name": _s("The server's name.", update_allowed=True),
    "image": _s("The name or id of the image to boot from.", custom_constraint="glance.image",
                update_allowed=True),
    "block_device_mapping": PropertySchema(LIST, "Block device mappings.",
                                           item=BLOCK_DEVICE_MAPPING),
    "block_device_mapping_v2": PropertySchema(LIST, "Block device mappings, version 2.",
                                              item=BLOCK_DEVICE_MAPPING_V2),
    "flavor": _s("The name or id of the flavor.", required=True, update_allowed=True,
                 custom_constraint="nova.flavor"),
    "flavor_update_policy": _s("How a flavor change is made: resize the server, or replace "
                               "it.", default=RESIZE, allowed_values=(RESIZE, REPLACE),
                               update_allowed=True),
    "image_update_policy": _s("How an image change is made: rebuild the server (keeping its "
                              "ephemeral disk or not), or replace it.", default=REBUILD,
                              allowed_values=(REBUILD, REPLACE, REBUILD_PRESERVE_EPHEMERAL),
                              update_allowed=True),
    "key_name": _s("The key pair to inject.", custom_constraint="nova.keypair"),
    "admin_user": _s("Hidden: the image's default cloud-init user is used."),
    "availability_zone": _s("The availability zone to place the server in."),
    "security_groups": PropertySchema(LIST, "Security group names or ids (for ports that "
                                            "Nova or the server makes).", default=[]),
    "networks": PropertySchema(LIST, "The server's NICs, in order.", item=NETWORK,
                               update_allowed=True),
    "scheduler_hints": PropertySchema(MAP, "Hints for the scheduler."),
    "metadata": PropertySchema(MAP, "Key/value metadata (values that are not strings are "
                                    "stored as JSON).", default={}, update_allowed=True),
    "user_data_format": _s("How user_data is passed: as part of a cloud-init multipart "
                           "(HEAT_CFNTOOLS, SOFTWARE_CONFIG) or as it is (RAW).",
                           default=HEAT_CFNTOOLS,
                           allowed_values=(HEAT_CFNTOOLS, RAW, SOFTWARE_CONFIG)),
    "software_config_transport": _s("How the server receives software configuration "
                                    "metadata.", default=TRANSPORTS[0],
                                    allowed_values=TRANSPORTS, update_allowed=True),
    "user_data_update_policy": _s("How a user_data change is made: replace the server, "
                                  "ignore it, or rebuild the server.", default=REPLACE,
                                  allowed_values=(REPLACE, IGNORE, REBUILD),
                                  update_allowed=True),
    "user_data": _s("User data for cloud-init.", default="", update_allowed=True),
    "reservation_id": _s("A UUID for the set of servers being requested."),
    "config_drive": PropertySchema(BOOLEAN, "Whether the server has a config drive."),
    "diskConfig": _s("How the disk is partitioned.", allowed_values=("AUTO", "MANUAL")),
    "personality": PropertySchema(MAP, "Deprecated: files to write (path: contents); Nova "
                                       "2.57+ refuses them.", default={}),
    "admin_pass": _s("The administrator password.", update_allowed=True),
    "tags": PropertySchema(LIST, "Server tags (the engine adds its own).", update_allowed=True,
                           item=PropertySchema(STRING)),
    "deployment_swift_data": PropertySchema(
        MAP, "Swift container and object for deployment data (POLL_TEMP_URL).", default={},
        update_allowed=True,
        schema={"container": _s("The container's name.", min=1),
                "object": _s("The object's name.", min=1)}),
}

ATTRIBUTES = frozenset({"name", "addresses", "networks", "first_address", "instance_name",
                        "accessIPv4", "accessIPv6", "console_urls", "tags",
                        "os_collect_config", "show"})

SCHEMA = TypeSchema(
    name="OS::Nova::Server",
    description="A Nova server (a virtual machine).",
    properties=PROPERTIES,
    attributes=ATTRIBUTES,
    snapshot=True,
    implicit=implicit.server,
    secret_properties=frozenset({"admin_pass"}),
)
